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

    /// What asks the hook about `request`'s publish to `topic` (`TopicAPI.Gate`): it allows the
    /// data as sent, or its replacement, or refuses it (`403` with its reason; no answer: `503`).
    func gate(_ request: HTTPRequest, topic: String, client: String) -> TopicAPI.Gate {
        let claims = AccessControl.bearer(request.headers[.authorization]).flatMap { try? access.checkToken($0).get() }
        let (user, _) = HookRequests.identity(claims)
        return { [hooks, counters] data, decided in
            let members: JSONObject = ["client": .string("http " + client), "user": user, "topic": .string(topic)]
            hooks.call(.publish, members, data: data) { answer in
                switch HookDecision.allow(answer, hook: .publish) {
                case .allow(let answer):
                    decided(.success(answer["data"].map { JSONWriter.encode($0) } ?? data))
                case .deny(let reason):
                    counters.refused(.hookDenied)
                    decided(.failure(ReplyError(.error(.forbidden, reason))))
                case .unavailable(let why):
                    decided(.failure(ReplyError(.error(.serviceUnavailable, why))))
                }
            }
        }
    }
}
