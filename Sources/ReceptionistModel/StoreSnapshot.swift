import ReceptionistJSON

/// A store's models exactly as they were at `version`.
public struct StoreSnapshot: Sendable {
    public let store: String
    public let version: UInt64
    public let models: [String: JSONValue]
}
