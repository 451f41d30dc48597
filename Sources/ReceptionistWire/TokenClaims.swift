import ReceptionistJSON

/// What a subscription token lets its holder read and write, and until when.
///
/// `stores` and `topics` list names; `"*"` allows every name, and a name ending in `*` allows
/// every name with that prefix (`"news.*"`). A kind the token does not list is not readable.
public struct TokenClaims: Sendable, Equatable {
    public var subject: String?
    /// Seconds since the Unix epoch after which the token is refused (`exp`, required).
    public var expiresAt: Double
    public var stores: [String]
    public var topics: [String]
    /// Topics the holder may publish to over its WebSocket (`publish`), patterns as `topics`.
    public var publish: [String]
    /// Topics and stores whose presence the holder may follow (`presence`), patterns as `topics`.
    public var presence: [String]
    /// Stores whose models the holder may write over HTTP (`write`), patterns as `stores`:
    /// `PUT`, `PATCH` and `DELETE` of a model and change sets, not creating or deleting a store.
    public var write: [String]
    /// The `info` claim: a JSON object of at most `maxInfoBytes`, as compact JSON text, shown to
    /// presence subscribers beside the holder's `sub`.
    public var info: [UInt8]?

    /// The most bytes the `info` claim may hold, compacted.
    public static let maxInfoBytes = 1024

    public init(
        subject: String? = nil, expiresAt: Double, stores: [String] = [], topics: [String] = [], publish: [String] = [],
        presence: [String] = [], write: [String] = [], info: [UInt8]? = nil
    ) {
        self.subject = subject
        self.expiresAt = expiresAt
        self.stores = stores
        self.topics = topics
        self.publish = publish
        self.presence = presence
        self.write = write
        self.info = info
    }

    /// Whether the token lets its holder write the models of `store`.
    public func allowsWriting(to store: String) -> Bool {
        Self.matches(write, store)
    }

    /// Whether the token lets its holder follow who else subscribes to `target`.
    public func allowsPresence(of target: StreamTarget) -> Bool {
        Self.matches(presence, target.name)
    }

    /// Whether the token lets its holder publish to `topic`.
    public func allowsPublishing(to topic: String) -> Bool {
        Self.matches(publish, topic)
    }

    /// Whether the token covers a subscription to `target`.
    public func allows(_ target: StreamTarget) -> Bool {
        switch target {
        case .store(let name): Self.matches(stores, name)
        case .topic(let name): Self.matches(topics, name)
        }
    }

    private static func matches(_ patterns: [String], _ name: String) -> Bool {
        patterns.contains { pattern in
            if pattern.hasSuffix("*") { return name.hasPrefix(pattern.dropLast()) }
            return pattern == name
        }
    }

    /// Reads the claims from a verified token's payload (and its compact text, for `info` as
    /// written), or says which claim is missing or wrong.
    init(payload: JSONValue, text: [UInt8]) throws(JSONWebToken.Failure) {
        guard payload.objectValue != nil else { throw .malformed("the payload is not a JSON object") }
        guard let exp = payload["exp"]?.numberValue, exp.isFinite else {
            throw .malformed("the token needs a numeric \"exp\" claim")
        }
        expiresAt = exp
        switch payload["sub"] {
        case nil, .null?: subject = nil
        case .string(let text)?: subject = text
        default: throw .malformed("\"sub\" must be a string")
        }
        stores = try Self.names(payload["stores"], claim: "stores")
        topics = try Self.names(payload["topics"], claim: "topics")
        publish = try Self.names(payload["publish"], claim: "publish")
        presence = try Self.names(payload["presence"], claim: "presence")
        write = try Self.names(payload["write"], claim: "write")
        info = try Self.info(payload["info"], in: text)
    }

    /// The `info` claim as compact JSON text, as written (escapes, numbers and repeated members
    /// kept): an object, at most `maxInfoBytes`.
    private static func info(_ value: JSONValue?, in payload: [UInt8]) throws(JSONWebToken.Failure) -> [UInt8]? {
        guard let value, value != .null else { return nil }
        guard value.objectValue != nil else { throw .malformed("\"info\" must be a JSON object") }
        // The last `info` member, as the parsed payload's value is.
        let written = JSONSpans.members(of: payload, in: 0..<payload.count)?.last { $0.key == "info" }
        let text = written.map { Array(payload[$0.value]) } ?? JSONWriter.encode(value)
        guard text.count <= maxInfoBytes else {
            throw .malformed("\"info\" must be at most \(maxInfoBytes) bytes of JSON")
        }
        return text
    }

    private static func names(_ value: JSONValue?, claim: String) throws(JSONWebToken.Failure) -> [String] {
        guard let value, value != .null else { return [] }
        guard case .array(let items) = value else { throw .malformed("\"\(claim)\" must be an array of names") }
        var names: [String] = []
        for item in items {
            guard let name = item.stringValue else { throw .malformed("\"\(claim)\" must be an array of names") }
            names.append(name)
        }
        return names
    }
}
