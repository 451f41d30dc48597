import ReceptionistJSON

/// One step of a commit. A commit applies all of its operations, or none.
public enum StoreOperation: Sendable, Hashable {
    /// Creates or replaces a model; the value must be an object.
    case put(model: String, value: JSONValue)
    /// Applies an RFC 7386 merge patch to an existing model; the patch must be an object.
    case patch(model: String, patch: JSONValue)
    /// Sets (or with nil removes) one value inside an existing model.
    case set(model: String, keyPath: ModelKeyPath, value: JSONValue?)
    /// Deletes an existing model.
    case delete(model: String)

    public var model: String {
        switch self {
        case .put(let model, _), .patch(let model, _), .set(let model, _, _), .delete(let model): model
        }
    }
}
