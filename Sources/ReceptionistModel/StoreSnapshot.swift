import ReceptionistJSON

/// A store's models exactly as they were at `version`.
public struct StoreSnapshot: Sendable {
    public let store: String
    public let version: UInt64
    public let models: [String: JSONValue]
    /// The store's epoch, read with the models (nil where it was not).
    public let epoch: String?
    /// How many times the store was reset as a replica, read with the models: a reset may keep
    /// the version and epoch and change the models.
    public let resets: UInt64

    public init(store: String, version: UInt64, models: [String: JSONValue], epoch: String? = nil, resets: UInt64 = 0) {
        self.store = store
        self.version = version
        self.models = models
        self.epoch = epoch
        self.resets = resets
    }
}
