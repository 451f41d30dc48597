import ReceptionistPush
import ReceptionistWire

/// An SSE request: where it resumes from, from `Last-Event-ID` or, for the first `EventSource`
/// request, which cannot set headers, `?since=`.
enum StreamRequest {
    /// Checks the target and the resume point; answers 4xx for what cannot be streamed.
    static func route(_ request: HTTPRequest, target: StreamTarget, hub: PushHub, grant: StreamGrant) -> RouteResult {
        // Whether a store exists is the subscribe hook's to tell, when it decides this stream: a
        // missing store is then answered 404 only once the hook has allowed it (`SSESession`).
        if let problem = hub.check(target),
           problem.code != .noSuchStore || !grant.hookMayDecide(target, presence: QueryFlag.value(query(request, "presence")) == true)
        {
            return .reply(.error(problem.code == .noSuchStore ? .notFound : .badRequest, problem.message))
        }
        // The stream's own ids are `<number>@<epoch>`: an `EventSource` that reconnects by itself
        // sends one back, and resumes only within that epoch. `?since=` and `?epoch=` are a
        // client's first request's.
        // A query's values are percent-decoded, as every query value is (`?since=%32` is 2).
        var text = request.headers[.lastEventID] ?? query(request, "since")
        // An empty `?since=` is refused, as `"since":""` is over WebSocket; an empty
        // `Last-Event-ID` is what an `EventSource` that saw no id would send, and asks for none.
        if request.headers[.lastEventID] == nil, text?.isEmpty == true {
            return .reply(.error(.badRequest, "since must be a whole number up to \(ClientMessage.maxSince)"))
        }
        // An empty `?epoch=` is refused, as an empty `"epoch"` over WebSocket is: it names no life.
        var epoch = query(request, "epoch")
        if let epoch, epoch.isEmpty || epoch.utf8.count > ClientMessage.maxEpochBytes {
            return .reply(.error(.badRequest, "epoch must be 1 to \(ClientMessage.maxEpochBytes) bytes"))
        }
        if let id = text, let at = id.firstIndex(of: "@") {
            let named = String(id[id.index(after: at)...])
            guard !named.isEmpty, named.utf8.count <= ClientMessage.maxEpochBytes else {
                return .reply(.error(.badRequest, "Last-Event-ID's epoch must be 1 to \(ClientMessage.maxEpochBytes) bytes"))
            }
            // `@x` names an epoch and no number: a resume that cannot be, not a fresh stream.
            guard !String(id[..<at]).trimmingSpaces.isEmpty else {
                return .reply(.error(.badRequest, "Last-Event-ID must be a number, or a number and @ and its epoch, not '\(id)'"))
            }
            text = String(id[..<at])
            epoch = named
        }
        let options: SubscriptionOptions
        switch subscriptionOptions(request) {
        case .success(let decoded): options = decoded
        case .failure(let problem): return .reply(.error(.badRequest, problem.message))
        }
        if case .topic = target, !options.isNone {
            return .reply(.error(.badRequest, "models, paths, maxRate and old apply to store streams"))
        }
        let presenceText = query(request, "presence")
        guard let presence = QueryFlag.value(presenceText) else {
            return .reply(.error(.badRequest, QueryFlag.problem("presence", presenceText ?? "")))
        }
        let heartbeat: StreamAsk.Heartbeat
        switch query(request, "heartbeat") {
        case nil, "comment": heartbeat = .comment
        case "event": heartbeat = .event
        case let other?: return .reply(.error(.badRequest, "heartbeat must be comment or event, not '\(other)'"))
        }
        // Checked before the 200, as the token's scope is: a refusal here is still a status.
        if presence, !grant.subscribeHook, let claims = grant.claims, !claims.allowsPresence(of: target) {
            return .reply(.error(.forbidden, "the token's presence claim does not cover \(target)"))
        }
        guard let text, !text.isEmpty else {
            return .stream(
                target, StreamAsk(since: nil, epoch: epoch, options: options, presence: presence, heartbeat: heartbeat), grant: grant)
        }
        // Digits only: `UInt64` also takes a sign (`+3`).
        let digits = text.trimmingSpaces
        guard digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let since = UInt64(digits), since <= ClientMessage.maxSince else {
            return .reply(.error(.badRequest, "Last-Event-ID or since must be a whole number up to \(ClientMessage.maxSince), not '\(text)'"))
        }
        return .stream(
            target, StreamAsk(since: since, epoch: epoch, options: options, presence: presence, heartbeat: heartbeat), grant: grant)
    }

    /// A request's subscription options (`models`, `paths`, `maxRate`, `old`), each list split
    /// on its commas before its items are percent-decoded.
    static func subscriptionOptions(_ request: HTTPRequest) -> Result<SubscriptionOptions, ClientMessage.Problem> {
        SubscriptionOptions.decode(query: { rawValues(request, $0) }, decoding: decoded)
    }

    /// Every value of `name` in the query string, as it came (still escaped).
    static func rawValues(_ request: HTTPRequest, _ name: String) -> [String] {
        guard let query = request.query else { return [] }
        var found: [String] = []
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.first == Substring(name) else { continue }
            found.append(parts.count > 1 ? String(parts[1]) : "")
        }
        return found
    }

    /// `text` percent-decoded (`+` is a space); one that does not decode (a bad escape, or bytes
    /// that are not UTF-8) is kept as it came: a model id may hold `%`, and one written unescaped
    /// is still the id its writer meant.
    static func decoded(_ text: Substring) -> String {
        RequestPath.percentDecoded(text) ?? String(text)
    }

    /// The first value of `name` in the query string, percent-decoded as every query value is
    /// (`?after=%30` is 0, as `?since=%32` is 2).
    static func query(_ request: HTTPRequest, _ name: String) -> String? {
        guard let query = request.query else { return nil }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.first == Substring(name) { return parts.count > 1 ? decoded(parts[1]) : "" }
        }
        return nil
    }
}

extension String {
    fileprivate var trimmingSpaces: Substring {
        var text = self[...]
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}
