import ReceptionistJSON

/// A message a subscriber sends over WebSocket (`docs/PROTOCOL.md`). A pure codec: text in, value out.
public enum ClientMessage: Sendable, Equatable {
    /// `epoch` is the store epoch `since` was read in; a different one means a fresh snapshot.
    /// `options` narrow a store subscription (models, paths, rate, old values); `presence` asks
    /// for the target's members, then their joins and leaves.
    case subscribe(StreamTarget, since: UInt64?, epoch: String? = nil, options: SubscriptionOptions = .none, presence: Bool = false)
    case unsubscribe(StreamTarget)
    /// Presents a subscription token (a JWT) for the subscriptions that follow.
    case authenticate(token: String)
    /// Presents an API key, for the publishes that follow.
    case authenticateKey(apiKey: String)
    /// Publishes `data` (the JSON text the client wrote, compacted) to a topic; `ref` is echoed.
    case publish(topic: String, data: [UInt8], ref: String?)
    /// Calls the backend's RPC hook with `method` and `data` (the parsed value); `id` is echoed.
    case rpc(id: String, method: String, data: JSONValue)
    /// Commits a change set to a store, as `POST /api/stores/{store}/changes` does: `request` is
    /// the message itself, whose `changes`, `ifVersion` and `ifMatch` the gateway reads.
    case commit(store: String, request: JSONValue, ref: String?)
    /// Asks for a `pong`, with `ref` echoed: how a client that cannot see WebSocket pings (a
    /// browser's) tells a gateway that no longer answers from a quiet one.
    case ping(ref: String?)

    /// Why a message could not be understood; answered with an `error` message, never a close.
    public struct Problem: Error, Sendable, Equatable {
        /// The protocol's error code, such as `bad_message` or `unknown_type`.
        public let code: Code
        public let message: String
        /// The `ref` of the publish or commit this answers, echoed so the client can match it.
        public var ref: String?
        /// The store's version now, for `precondition_failed`.
        public var version: UInt64?

        public init(_ code: Code, _ message: String, ref: String? = nil) {
            self.code = code
            self.message = message
            self.ref = ref
        }

        /// Every error code of `docs/PROTOCOL.md`; the raw value is what the client reads.
        public enum Code: String, Sendable, CaseIterable {
            case badMessage = "bad_message"
            case unknownType = "unknown_type"
            case noSuchStore = "no_such_store"
            case invalidTopic = "invalid_topic"
            case alreadySubscribed = "already_subscribed"
            case notSubscribed = "not_subscribed"
            case unauthorized = "unauthorized"
            case forbidden = "forbidden"
            case tokenInvalid = "token_invalid"
            case tokenExpired = "token_expired"
            case tooManySubscriptions = "too_many_subscriptions"
            case rateLimited = "rate_limited"
            case unavailable = "unavailable"
            case preconditionFailed = "precondition_failed"
            case storageFailed = "storage_failed"
        }
    }

    /// Decodes one text message (already valid UTF-8).
    ///
    /// The text is checked and compacted without building a value, and split into its members.
    /// A publish, the message sent most, is read from those: its data is never built, since it
    /// is passed on as written. Any other message is parsed whole, from the compact text.
    public static func decode(_ text: [UInt8]) -> Result<ClientMessage, Problem> {
        let compact: [UInt8]
        do {
            compact = try JSONParser.compact(text)
        } catch {
            return .failure(Problem(.badMessage, "not JSON: \(error)"))
        }
        guard let members = JSONSpans.members(of: compact, in: 0..<compact.count) else {
            return .failure(Problem(.badMessage, "a message is a JSON object"))
        }
        if let type = members.last(where: { $0.key == "type" })?.value, isPublish(compact[type]) {
            return decodePublish(members, in: compact)
        }
        // Valid already: parsing the compact text cannot fail.
        guard let value = try? JSONParser.parse(compact) else { return .failure(Problem(.badMessage, "not JSON")) }
        guard let type = value["type"]?.stringValue else {
            return .failure(Problem(.badMessage, "a message needs a string \"type\""))
        }
        // A misspelt member (`pathz`, `idempotencyKey`) is refused, never ignored: ignored, it
        // would do other than its client meant (send every path), and the client could not tell.
        if let known = takes[type], case .object(let given) = value,
           let unknown = given.keys.sorted().first(where: { !known.contains($0) })
        {
            // Echoed as the answer to a well-formed message would be: a commit's or ping's `ref`, an
            // rpc's `id`.
            let ref = (try? decodeRef(raw: type == "rpc" ? value["id"] : value["ref"]).get()) ?? nil
            let article = ["auth", "unsubscribe", "rpc"].contains(type) ? "an" : "a"
            return .failure(Problem(.badMessage, "unknown member '\(unknown)' of \(article) \(type); it takes \(known.sorted().joined(separator: ", "))", ref: ref))
        }
        switch type {
        case "subscribe", "unsubscribe":
            break
        case "auth":
            guard value["apiKey"] == nil || value["token"] == nil else {
                return .failure(Problem(.badMessage, "an auth message takes a \"token\" or an \"apiKey\", not both"))
            }
            if let key = value["apiKey"]?.stringValue, !key.isEmpty {
                return .success(.authenticateKey(apiKey: key))
            }
            guard let token = value["token"]?.stringValue, !token.isEmpty else {
                return .failure(Problem(.badMessage, "an auth message needs a string \"token\" or \"apiKey\""))
            }
            return .success(.authenticate(token: token))
        case "publish":
            return decodePublish(members, in: compact)
        case "rpc":
            return decodeRPC(value)
        case "commit":
            return decodeCommit(value)
        case "ping":
            return decodeRef(value).map { .ping(ref: $0) }
        default:
            return .failure(Problem(.unknownType, "unknown type '\(type)'; use auth, subscribe, unsubscribe, publish, commit, rpc or ping"))
        }
        let target: StreamTarget
        switch (value["store"], value["topic"]) {
        case (.string(let store)?, nil): target = .store(store)
        case (nil, .string(let topic)?): target = .topic(topic)
        default:
            return .failure(Problem(.badMessage, "name exactly one of \"store\" or \"topic\", as a string"))
        }
        if type == "unsubscribe" { return .success(.unsubscribe(target)) }
        var since: UInt64?
        if let raw = value["since"], raw != .null {
            // Read as written: a fraction or exponent that rounds to a whole number is not one.
            guard let number = raw.uint64Value, number <= maxSince else {
                return .failure(Problem(.badMessage, "\"since\" must be a whole number from 0 to \(maxSince)"))
            }
            since = number
        }
        var epoch: String?
        if let raw = value["epoch"], raw != .null {
            guard let text = raw.stringValue, !text.isEmpty, text.utf8.count <= maxEpochBytes else {
                return .failure(Problem(.badMessage, "\"epoch\" must be the string a snapshot gave"))
            }
            epoch = text
        }
        let options: SubscriptionOptions
        switch SubscriptionOptions.decode(message: value) {
        case .success(let decoded): options = decoded
        case .failure(let problem): return .failure(problem)
        }
        if case .topic = target, !options.isNone {
            return .failure(Problem(.badMessage, "\"models\", \"paths\", \"maxRate\" and \"old\" apply to store subscriptions"))
        }
        var presence = false
        if let raw = value["presence"], raw != .null {
            guard case .bool(let asked) = raw else {
                return .failure(Problem(.badMessage, "\"presence\" must be true or false"))
            }
            presence = asked
        }
        return .success(.subscribe(target, since: since, epoch: epoch, options: options, presence: presence))
    }

    // The limits of docs/PROTOCOL.md's "Limits" table, which the client library keeps too
    // (`LIMITS` in Public/receptionist-client.js; Tests/e2e/test_limits.py holds them equal).

    /// The most bytes a publish's or commit's `ref`, or an RPC's `id`, may have.
    public static let maxRefBytes = 64

    /// The most bytes a store epoch may have.
    public static let maxEpochBytes = 64

    /// The highest `since`: 2^53 - 1, the largest integer every JSON reader keeps exactly.
    public static let maxSince: UInt64 = 9_007_199_254_740_991

    /// The most bytes an RPC's `method` may have.
    public static let maxMethodBytes = 256

    private static func decodeRef(_ value: JSONValue) -> Result<String?, Problem> {
        decodeRef(raw: value["ref"])
    }

    /// `raw`: the message's `ref` member, if it has one.
    private static func decodeRef(raw: JSONValue?) -> Result<String?, Problem> {
        guard let raw, raw != .null else { return .success(nil) }
        guard let given = raw.stringValue, given.utf8.count <= maxRefBytes else {
            return .failure(Problem(.badMessage, "\"ref\" must be a string of at most \(maxRefBytes) bytes"))
        }
        return .success(given)
    }

    private static func decodeRPC(_ value: JSONValue) -> Result<ClientMessage, Problem> {
        guard let id = value["id"]?.stringValue, !id.isEmpty, id.utf8.count <= maxRefBytes else {
            return .failure(Problem(.badMessage, "an rpc message needs a string \"id\" of 1 to \(maxRefBytes) bytes"))
        }
        guard let method = value["method"]?.stringValue, !method.isEmpty, method.utf8.count <= maxMethodBytes else {
            return .failure(Problem(.badMessage, "an rpc message needs a string \"method\" of 1 to \(maxMethodBytes) bytes", ref: id))
        }
        return .success(.rpc(id: id, method: method, data: value["data"] ?? .null))
    }

    /// The members each type of message takes.
    private static let takes: [String: Set<String>] = [
        "subscribe": ["type", "store", "topic", "since", "epoch", "models", "paths", "maxRate", "old", "presence"],
        "unsubscribe": ["type", "store", "topic"],
        "auth": ["type", "token", "apiKey"],
        "rpc": ["type", "id", "method", "data"],
        "commit": ["type", "store", "changes", "ifVersion", "ifMatch", "ref"],
        "ping": ["type", "ref"],
    ]

    private static func decodeCommit(_ value: JSONValue) -> Result<ClientMessage, Problem> {
        let ref: String?
        switch decodeRef(value) {
        case .success(let given): ref = given
        case .failure(let problem): return .failure(problem)
        }
        guard let store = value["store"]?.stringValue else {
            return .failure(Problem(.badMessage, "a commit message needs a string \"store\"", ref: ref))
        }
        guard case .array? = value["changes"] else {
            return .failure(Problem(.badMessage, "a commit message needs an array \"changes\"", ref: ref))
        }
        return .success(.commit(store: store, request: value, ref: ref))
    }

    /// Whether a publish takes a member so named: compared without hashing, as every publish is.
    private static func isPublishMember(_ key: String) -> Bool {
        key == "type" || key == "topic" || key == "data" || key == "ref"
    }

    /// Whether a member's value is the text `"publish"` (written with an escape, it is found by
    /// the parsed path instead, to the same end).
    private static func isPublish(_ text: ArraySlice<UInt8>) -> Bool {
        let publish: StaticString = #""publish""#
        guard text.count == publish.utf8CodeUnitCount else { return false }
        return zip(text, UnsafeBufferPointer(start: publish.utf8Start, count: publish.utf8CodeUnitCount)).allSatisfy { $0 == $1 }
    }

    /// A publish: its topic, its `ref`, and its `data` as the bytes the client wrote (compacted,
    /// never parsed and written again), found among the members of the compact text.
    private static func decodePublish(_ members: [(key: String, value: Range<Int>)], in compact: [UInt8])
        -> Result<ClientMessage, Problem>
    {
        // The members read, each small, parsed alone; a repeated name's last value wins, as in a
        // parsed object.
        func member(_ name: String) -> JSONValue? {
            members.last(where: { $0.key == name }).flatMap { JSONSpans.value(of: compact, in: $0.value) }
        }
        let ref: String?
        switch decodeRef(raw: member("ref")) {
        case .success(let given): ref = given
        case .failure(let problem): return .failure(problem)
        }
        if let unknown = members.first(where: { !isPublishMember($0.key) }) {
            return .failure(Problem(.badMessage, "unknown member '\(unknown.key)' of a publish; it takes data, ref, topic, type", ref: ref))
        }
        guard let topic = member("topic")?.stringValue else {
            return .failure(Problem(.badMessage, "a publish message needs a string \"topic\"", ref: ref))
        }
        guard let data = members.last(where: { $0.key == "data" })?.value else {
            return .failure(Problem(.badMessage, "a publish message needs \"data\"", ref: ref))
        }
        return .success(.publish(topic: topic, data: Array(compact[data]), ref: ref))
    }
}
