import ReceptionistJSON
import ReceptionistWire

/// A client's publish over HTTP (`POST /api/topics/{topic}/messages` allowed by a token's
/// `publish` grant, not an API key) on a gateway with a publish hook: asked as a WebSocket client's
/// publish is, so the hook moderates or rewrites a client's publishes whichever way they come
/// (`docs/HOOKS.md`). A caller with an API key (the backend) is not asked. Loop thread only.
struct ClientPublishes {
    let access: AccessControl
    let hooks: HookClient
    let counters: GatewayCounters
    /// Which names the publish hook is asked about; a grant alone decides the others.
    let namespaces: Namespaces

    /// Whether the hook decides a publish to `topic` by a caller counted as `rateKey`.
    func decides(_ topic: String, rateKey: String) -> Bool {
        rateKey.hasPrefix(AccessControl.tokenRateKeyPrefix) && namespaces.calls(.publish, for: topic)
    }

    /// Asks the hook, then answers through `publish` with what it allows: the data as sent, or its
    /// replacement. A job, so the connection's later requests wait for the hook and the publish,
    /// and its publishes are numbered in the order it sent them.
    func route(
        _ request: HTTPRequest, topic: String, client: String, publish: @escaping ([UInt8]) -> RouteResult,
        perform: @escaping (RouteResult, JobHandoff, @escaping (Reply) -> Void) -> Void
    ) -> RouteResult {
        let data: [UInt8], value: JSONValue
        switch Reply.compactJSONBody(request) {
        case .success(let bytes): data = bytes
        case .failure(let failure): return .reply(failure.reply)
        }
        do { value = try JSONParser.parse(data) } catch { return .reply(.error(.badRequest, "the body is not JSON: \(error)")) }
        let claims = AccessControl.bearer(request.headers["Authorization"]).flatMap { try? access.checkToken($0).get() }
        let (user, _) = HookRequests.identity(claims)
        let body: JSONValue = ["client": .string("http " + client), "user": user, "topic": .string(topic), "data": value]
        return .job { [hooks, counters] handoff, done in
            hooks.call(.publish, body) { answer in
                switch HookDecision.allow(answer, hook: .publish) {
                case .allow(let answer):
                    perform(publish(answer["data"].map { JSONWriter.encode($0) } ?? data), handoff, done)
                case .deny(let reason):
                    counters.refused(.hookDenied)
                    done(.error(.forbidden, reason))
                case .unavailable(let why):
                    done(.error(.serviceUnavailable, why))
                }
            }
        }
    }
}
