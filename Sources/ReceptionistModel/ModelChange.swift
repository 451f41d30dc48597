import ReceptionistJSON

/// One committed change to one place in one model.
public struct ModelChange: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case created, updated, deleted
    }

    public let model: String
    public let keyPath: ModelKeyPath
    public internal(set) var kind: Kind
    /// The value before the change; nil where there was none or the observer did not ask for it.
    public var oldValue: JSONValue?
    /// The value after the change; nil where it was removed or the observer did not ask for it.
    public var newValue: JSONValue?

    public init(model: String, keyPath: ModelKeyPath, oldValue: JSONValue?, newValue: JSONValue?) {
        // The kind first, from the arguments: read back from `self` after the values are moved
        // in, it made every new change a copy of a temporary (a retain and release per field).
        kind = Self.kind(old: oldValue, new: newValue)
        self.model = model
        self.keyPath = keyPath
        self.oldValue = oldValue
        self.newValue = newValue
    }

    /// A change that leaves no value is a deletion, even of what was not there (removing a path
    /// that is absent, or a path created and removed again within one coalesced frame): the
    /// receiver removes it, and holds what the store holds.
    static func kind(old: JSONValue?, new: JSONValue?) -> Kind {
        new == nil ? .deleted : (old == nil ? .created : .updated)
    }
}
