import ReceptionistJSON
import ReceptionistWire

/// A client's read over HTTP of a store (its snapshot, a model, its `changes`) or of a topic's
/// messages, on a gateway with a subscribe hook: decided as a subscription is, so that what the
/// hook narrows a subscription to, it narrows a read to, and what it refuses a subscription, it
/// refuses a read (`docs/HOOKS.md`). The reader is who its token says (`Authorization: Bearer`)
/// or who the connect hook admits (by its cookie, say); a grant that covers the store or topic
/// reads it whole, and otherwise the subscribe hook allows the read, narrowed, or refuses it. A
/// caller with an API key (the backend) is not asked. Loop thread only.
struct ClientReads {
    let access: AccessControl
    let hooks: HookClient
    let forwardHeaders: [String]
    let counters: GatewayCounters
    /// Which names the subscribe hook is asked about; a grant alone decides the others.
    let namespaces: Namespaces

    /// What `request` reads, if it is such a read: a GET or HEAD of a store's data or a topic's
    /// messages, without an API key.
    func target(of request: HTTPRequest, _ segments: [String]) -> StreamTarget? {
        guard request.method == .get || request.method == .head, segments.count >= 2 else { return nil }
        let target: StreamTarget
        switch (segments[0], segments.count) {
        case ("stores", 2): target = .store(segments[1])
        case ("stores", 3) where segments[2] == "changes": target = .store(segments[1])
        case ("stores", 4) where segments[2] == "models": target = .store(segments[1])
        case ("topics", 3) where segments[2] == "messages": target = .topic(segments[1])
        default: return nil
        }
        if let presented = AccessControl.bearer(request.headers[.authorization]),
           case .allowed = access.checkKey(presented: presented), access.requiresAPIKey
        {
            return nil
        }
        return target
    }

    /// Decides the read, then answers it through `route`, handed what the reader may see (nil:
    /// all of it). A job, so the connection's later requests wait for the hook and the read, as
    /// they wait for any store read (invariant 58).
    func route(
        _ request: HTTPRequest, target: StreamTarget, client: String,
        then route: @escaping (SubscriptionOptions?) -> RouteResult,
        perform: @escaping (RouteResult, JobHandoff, @escaping (Reply) -> Void) -> Void
    ) -> RouteResult {
        .job { handoff, done in
            identify(request, client: client) { identity in
                switch identity {
                case .failure(let refusal):
                    done(refusal.reply)
                case .success(let claims) where claims.allows(target):
                    perform(route(nil), handoff, done)
                case .success where !namespaces.calls(.subscribe, for: target.name):
                    // The name's namespace leaves the subscribe hook out: as a subscription is.
                    counters.refused(.tokenScope)
                    done(.error(.forbidden, "the grant does not cover '\(target.name)', and its namespace asks no subscribe hook"))
                case .success(let claims):
                    let (user, info) = HookRequests.identity(claims)
                    // What the read asks for, as the hook is told of a subscription's options (a
                    // malformed query is refused by the read itself, once allowed).
                    let options = (try? StreamRequest.subscriptionOptions(request).get()) ?? .none
                    let body = HookRequests.subscribe(
                        client: .string("http " + client), user: user, info: info, target: target, options: options, presence: false)
                    hooks.call(.subscribe, body) { answer in
                        switch HookDecision.subscribe(answer, asked: .none) {
                        case .success(let allowed): perform(route(allowed), handoff, done)
                        case .failure(let problem):
                            if problem.code == .forbidden { counters.refused(.hookDenied) }
                            done(.error(problem.code == .unavailable ? .serviceUnavailable : .forbidden, problem.message))
                        }
                    }
                }
            }
        }
    }

    /// Who reads: a token's claims, or the connect hook's; the refusal otherwise.
    private func identify(_ request: HTTPRequest, client: String, _ done: @escaping (Result<TokenClaims, ReplyError>) -> Void) {
        if let token = AccessControl.bearer(request.headers[.authorization]), access.tokenSecretSet {
            switch access.checkToken(token) {
            case .success(let claims): return done(.success(claims))
            case .failure(let failure): return done(.failure(ReplyError(.error(.unauthorized, failure.description))))
            }
        }
        guard access.connectHook else {
            counters.refused(.tokenMissing)
            return done(.failure(ReplyError(.error(.unauthorized, "a read needs a token (Authorization: Bearer) or a session the connect hook admits"))))
        }
        let body = HookRequests.connect(
            client: .string("http " + client), transport: "http", ConnectRequest(request, remoteAddress: client, forward: forwardHeaders))
        hooks.call(.connect, body) { answer in
            switch HookDecision.connect(answer, nowSeconds: AccessControl.nowSeconds()) {
            case .admit(let claims): done(.success(claims))
            case .refuse(let status, let reason):
                counters.refused(.connectHook)
                done(.failure(ReplyError(.error(status == 401 ? .unauthorized : .forbidden, reason))))
            case .unavailable(let why):
                counters.refused(.connectHook)
                done(.failure(ReplyError(.error(.serviceUnavailable, why))))
            }
        }
    }
}
