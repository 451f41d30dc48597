import ReceptionistJSON

/// One step of a commit. A commit applies all of its operations, or none.
///
/// A struct of plain fields rather than an enum with payloads: a commit reads every operation
/// in place, field by field, and matching an enum's payloads copies the whole case (retaining
/// and then releasing each field), which was a tenth of a committed change's cost.
public struct StoreOperation: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case put, patch, set, delete
    }

    public let kind: Kind
    public let model: String
    /// Where a `set` writes; `.whole` for the other kinds.
    public let keyPath: ModelKeyPath
    /// A `put`'s model, a `patch`'s merge patch, a `set`'s value (nil removes); nil for `delete`.
    public let value: JSONValue?

    private init(kind: Kind, model: String, keyPath: ModelKeyPath = .whole, value: JSONValue?) {
        self.kind = kind
        self.model = model
        self.keyPath = keyPath
        self.value = value
    }

    /// Creates or replaces a model; the value must be an object.
    public static func put(model: String, value: JSONValue) -> StoreOperation {
        StoreOperation(kind: .put, model: model, value: value)
    }

    /// Applies an RFC 7386 merge patch to an existing model; the patch must be an object.
    public static func patch(model: String, patch: JSONValue) -> StoreOperation {
        StoreOperation(kind: .patch, model: model, value: patch)
    }

    /// Sets (or with nil removes) one value inside an existing model.
    public static func set(model: String, keyPath: ModelKeyPath, value: JSONValue?) -> StoreOperation {
        StoreOperation(kind: .set, model: model, keyPath: keyPath, value: value)
    }

    /// Deletes an existing model.
    public static func delete(model: String) -> StoreOperation {
        StoreOperation(kind: .delete, model: model, value: nil)
    }
}
