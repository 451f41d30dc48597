import ReceptionistJSON
import ReceptionistPush
import ReceptionistWire

/// What WebSocket and SSE sessions ask the backend's hooks (`docs/HOOKS.md`).
extension StreamSession {
    /// This connection's id, as presence and the hooks name it.
    var clientName: JSONValue { .string(PushEncoder.clientID(core.clientID)) }

    /// Who the connection is, for a hook's request: the `sub` of its token or of the connect
    /// hook's answer, and its `info`.
    var hookIdentity: (user: JSONValue, info: JSONValue) {
        let claims = core.claims
        let info = claims?.info.flatMap { try? JSONParser.parse($0) } ?? .null
        return (claims?.subject.map(JSONValue.string) ?? .null, info)
    }

    /// Asks the connect hook to admit this connection, which brought no token; `done` gets its
    /// decision on the loop, unless the connection closed meanwhile.
    func askConnectHook(_ request: ConnectRequest, _ done: @escaping (HookDecision.Connect) -> Void) {
        guard let hooks = services.hooks else { return done(.unavailable("no connect hook is set")) }
        var headers = JSONObject()
        for (name, value) in request.headers { headers[name] = .string(value) }
        let body: JSONValue = [
            "client": clientName, "transport": .string(transport.rawValue), "remoteAddress": .string(request.remoteAddress),
            "headers": .object(headers),
        ]
        hooks.call(.connect, body) { [weak self] answer in
            guard let self, self.connection.state == .open else { return }
            let decision = HookDecision.connect(answer, nowSeconds: AccessControl.nowSeconds())
            if case .admit = decision {} else { self.services.counters.refused(.connectHook) }
            done(decision)
        }
    }
}
