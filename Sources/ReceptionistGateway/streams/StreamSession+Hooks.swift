import ReceptionistJSON
import ReceptionistPush
import ReceptionistWire

/// What WebSocket and SSE sessions ask the backend's hooks (`docs/HOOKS.md`).
extension StreamSession {
    /// This connection's id, as presence and the hooks name it.
    var clientName: JSONValue { .string(PushEncoder.clientID(core.clientID)) }

    /// Who the connection is, for a hook's request: the `sub` of its token or of the connect
    /// hook's answer, and its `info`.
    var hookIdentity: (user: JSONValue, info: JSONValue) { HookRequests.identity(core.claims) }

    /// Asks the connect hook to admit this connection, which brought no token; `done` gets its
    /// decision on the loop, unless the connection closed meanwhile.
    func askConnectHook(_ request: ConnectRequest, _ done: @escaping (HookDecision.Connect) -> Void) {
        guard let hooks = services.hooks else { return done(.unavailable("no connect hook is set")) }
        hooks.call(.connect, HookRequests.connect(client: clientName, transport: transport.rawValue, request)) { [weak self] answer in
            guard let self, self.connection.state == .open else { return }
            let decision = HookDecision.connect(answer, nowSeconds: AccessControl.nowSeconds())
            if case .admit = decision {} else { self.services.counters.refused(.connectHook) }
            done(decision)
        }
    }
}

extension StreamSession {
    /// Whether the subscribe hook decides a subscription to `target`: it is set, and what this
    /// stream holds does not grant it.
    func needsSubscribeHook(_ target: StreamTarget, presence: Bool) -> Bool {
        guard services.access.requiresToken, services.hooks?.isSet(.subscribe) == true,
              services.config.namespaces.calls(.subscribe, for: target.name)
        else { return false }
        // No token yet: refused as `token_missing`, as over SSE and HTTP, never left to the hook.
        guard let claims = core.claims else { return false }
        return !claims.allows(target) || (presence && !claims.allowsPresence(of: target))
    }

    /// Asks the subscribe hook about `target`; `done` gets the options narrowed to the models and
    /// paths it allows, or the refusal, on the loop, unless the connection closed meanwhile.
    func askSubscribeHook(
        _ target: StreamTarget, options: SubscriptionOptions, presence: Bool,
        _ done: @escaping (Result<SubscriptionOptions, ClientMessage.Problem>) -> Void
    ) {
        guard let hooks = services.hooks else { return done(.failure(ClientMessage.Problem(.unavailable, "no subscribe hook is set"))) }
        let (user, info) = hookIdentity
        let body = HookRequests.subscribe(
            client: clientName, user: user, info: info, target: target, options: options, presence: presence)
        hooks.call(.subscribe, body) { [weak self] answer in
            guard let self, connection.state == .open else { return }
            let store = if case .store = target { true } else { false }
            switch HookDecision.subscribe(answer, asked: options, store: store) {
            case .success(let narrowed): done(.success(narrowed))
            case .failure(let problem):
                if problem.code == .forbidden { services.counters.refused(.hookDenied) }
                done(.failure(problem))
            }
        }
    }
}

/// How long before the connect hook's grant runs out the refresh hook is asked to extend it.
let refreshLeadSeconds = 5.0

extension StreamSession {
    /// Asks the refresh hook, once, to extend the connect hook's grant when it is about to run
    /// out. An extension moves its end; a refusal ends the stream (1008 `expired`); no answer
    /// leaves it to run out at its end, announced as `token_expired`.
    func refreshIfDue() {
        guard let hooks = services.hooks, hooks.isSet(.refresh), core.grantFromHook, !core.refreshing,
              let claims = core.claims, claims.expiresAt.isFinite,
              AccessControl.nowSeconds() >= core.refreshAt ?? (claims.expiresAt - refreshLeadSeconds)
        else { return }
        core.refreshing = true
        let (user, info) = hookIdentity
        hooks.call(.refresh, HookRequests.refresh(client: clientName, user: user, info: info, expiresAt: claims.expiresAt)) { [weak self] answer in
            // A token presented meanwhile (`auth`) replaced the grant asked about.
            guard let self, connection.state == .open, core.grantFromHook, core.refreshing else { return }
            switch HookDecision.refresh(answer, nowSeconds: AccessControl.nowSeconds()) {
            case .extend(let until):
                var extended = core.claims
                extended?.expiresAt = until
                core.claims = extended
                core.refreshing = false
                // Asked again before the new end; halfway to it when it is nearer than twice the
                // lead (a short sliding grant), so a backend is asked once per extension at most,
                // not at every sweep.
                let left = max(0, until - AccessControl.nowSeconds())
                core.refreshAt = until - min(refreshLeadSeconds, left / 2)
            case .refuse(let reason):
                services.counters.refused(.tokenExpired)
                end(.grantRefused(reason))
            case .unavailable(let why):
                services.logger.debug("refresh hook did not answer", metadata: ["why": "\(why)"])
            }
        }
    }
}
