import ReceptionistJSON

/// One committed change to one place in one model.
public struct ModelChange: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case created, updated, deleted
    }

    public let model: String
    public let keyPath: ModelKeyPath
    public internal(set) var kind: Kind
    /// The store's slot of `model` when the change was committed, or -1: a hint that lets a
    /// coalescing buffer find the model's pending changes without hashing its id. Only a hint: a
    /// slot is used again after a delete, so whoever reads it checks the model it finds there.
    /// Beside `kind`, it takes no room of its own. Not part of a change's equality.
    var slotHint: Int32 = -1
    /// The value before the change; nil where there was none or the observer did not ask for it.
    public var oldValue: JSONValue?
    /// The value after the change; nil where it was removed or the observer did not ask for it.
    public var newValue: JSONValue?

    /// A change that leaves no value is a deletion, even of what was not there (removing a path
    /// that is absent, or a path created and removed again within one coalesced frame): the
    /// receiver removes it, and holds what the store holds.
    static func kind(old: JSONValue?, new: JSONValue?) -> Kind {
        new == nil ? .deleted : (old == nil ? .created : .updated)
    }

    public static func == (left: ModelChange, right: ModelChange) -> Bool {
        left.model == right.model && left.keyPath == right.keyPath && left.kind == right.kind
            && left.oldValue == right.oldValue && left.newValue == right.newValue
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(model)
        hasher.combine(keyPath)
        hasher.combine(kind)
        hasher.combine(oldValue)
        hasher.combine(newValue)
    }
}

// The public initialiser is here, not in the struct, so that the struct keeps its memberwise
// one: the commit builds its changes with that. An explicit initialiser, whatever its body,
// made every change appended to an array a copy of a temporary and its destruction (a retain
// and release of each field; Swift 6.3), where the memberwise one builds it in place.
extension ModelChange {
    public init(model: String, keyPath: ModelKeyPath, oldValue: JSONValue?, newValue: JSONValue?) {
        self.init(
            model: model, keyPath: keyPath, kind: Self.kind(old: oldValue, new: newValue), oldValue: oldValue,
            newValue: newValue)
    }
}
