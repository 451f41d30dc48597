import ReceptionistJSON

/// A store's models exactly as they were at `version`.
public struct StoreSnapshot: Sendable {
    public let store: String
    public let version: UInt64
    public let models: [String: JSONValue]

    public init(store: String, version: UInt64, models: [String: JSONValue]) {
        self.store = store
        self.version = version
        self.models = models
    }
}
