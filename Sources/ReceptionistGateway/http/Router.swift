import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// Maps a request to its reply, or to work for a job thread, after the trust checks of
/// `docs/SECURITY.md`: origin, API key, publish rate and subscription token. Loop thread only.
final class Router {
    private let staticFiles: StaticFiles
    private let storeAPI: StoreAPI
    private let jobAPI: JobAPI
    private let topicAPI: TopicAPI
    private let presenceAPI: PresenceAPI
    private let hub: PushHub
    private let enableEcho: Bool
    /// The headers the connect hook is also told (`--hook-forward-header`).
    private let forwardHeaders: [String]
    /// Whether the subscribe hook may allow what a stream's grant does not cover.
    private let subscribeHook: Bool
    private let namespaces: Namespaces
    /// A client's store reads, decided as subscriptions are; nil without a subscribe hook.
    private let clientReads: ClientReads?
    /// Asks the publish hook about a token's publishes; nil without one.
    private let clientPublishes: ClientPublishes?
    private let access: AccessControl
    private let origins: OriginPolicy
    private let publisher: TopicPublisher
    private let counters: GatewayCounters
    /// `/healthz`, `/readyz`, `/metrics`, and whether the gateway takes new streams.
    private let operations: OperationsEndpoints

    init(
        staticFiles: StaticFiles, stores: StoreRegistry, jobs: JobRunner, hub: PushHub,
        publisher: TopicPublisher, idempotency: Idempotency, config: GatewayConfig, access: AccessControl,
        counters: GatewayCounters, operations: OperationsEndpoints, storeDeleted: @escaping @Sendable (String, ModelStore?) -> Void,
        storeLog: LoopBound<any StoreSource>?, hooks: HookClient? = nil
    ) {
        self.staticFiles = staticFiles
        storeAPI = StoreAPI(
            stores: stores, idempotency: idempotency, deleted: storeDeleted,
            log: storeLog)
        jobAPI = JobAPI(stores: stores, jobs: jobs)
        topicAPI = TopicAPI(hub: hub, publisher: publisher, idempotency: idempotency)
        presenceAPI = PresenceAPI(hub: hub, stores: stores)
        self.hub = hub
        enableEcho = config.enableEcho
        forwardHeaders = config.hooks.forwardHeaders
        subscribeHook = config.hooks.url(.subscribe) != nil
        namespaces = config.namespaces
        clientReads = hooks.flatMap { hooks in
            hooks.isSet(.subscribe)
                ? ClientReads(
                    access: access, hooks: hooks, forwardHeaders: config.hooks.forwardHeaders, counters: counters,
                    namespaces: config.namespaces) : nil
        }
        clientPublishes = hooks.flatMap { hooks in
            hooks.isSet(.publish)
                ? ClientPublishes(access: access, hooks: hooks, counters: counters, namespaces: config.namespaces) : nil
        }
        self.access = access
        origins = OriginPolicy(allowed: config.allowedOrigins, loopbackOnly: ListenPolicy.isLoopback(config.host))
        self.publisher = publisher
        self.counters = counters
        self.operations = operations
    }

    /// Headers a request may carry once at most.
    static let singleHeaders: [KnownHeader] = [.authorization, .origin, .idempotencyKey]

    /// Whether `request` asks for `/healthz`, `/readyz` or `/metrics`: what a connection over the
    /// limit may still ask (`ConnectionTable`), so probes and scrapes see a full gateway.
    func asksOperations(_ request: HTTPRequest) -> Bool {
        operations.answer(request.rawPath) != nil
    }

    /// `client` is the peer's address; `now` the loop's time in milliseconds.
    func route(_ request: HTTPRequest, client: String, now: UInt64) -> RouteResult {
        // The path is found once; the API's own paths are told apart from the rest first, since
        // nothing else under `/api` is served.
        let rawPath = request.rawPath
        let api: APIPath?
        do {
            api = try APIPath(rawPath: rawPath)
        } catch {
            return .reply(Reply(.error(.badRequest, "the path is not allowed: \(error)"), closesConnection: true))
        }
        // A credential, an origin or an idempotency key sent twice is ambiguous (which one did a
        // proxy on the way read?): refused, never taken as the first.
        if let repeated = request.headers.repeated(among: Self.singleHeaders) {
            return .reply(.error(.badRequest, "\(repeated.name) is sent more than once; send it once"))
        }
        if api == nil {
            if let answer = operations.answer(rawPath) { return .reply(readOnly(request, answer)) }
            switch rawPath {
            case "/ws":
                return upgrade(request, .push, client: client)
            case "/ws/echo" where enableEcho:
                return upgrade(request, .echo, client: client)
            default:
                break
            }
        }
        let origin = request.headers[.origin]
        guard let segments = api?.segments else {
            let reply = readOnly(request) { staticFiles.reply(for: request) }
            // A page on an allowed origin may import the client library: a module script is
            // fetched with CORS.
            guard origin != nil, origins.allows(origin: origin, host: request.headers[.host]) else { return .reply(reply) }
            return .reply(reply.withHeaders(origins.corsHeaders(origin: origin)))
        }
        if let refusal = refuseOrigin(request, origin: origin, "call this API") { return .reply(refusal) }
        if request.method == .options, let origin {
            return .reply(.noContent(headers: origins.preflight(origin: origin)))
        }
        let caller: Caller
        switch checkMutation(request, segments, client: client, now: now) {
        case .success(let allowed): caller = allowed
        case .failure(let refusal): return .reply(refusal.reply.withHeaders(origins.corsHeaders(origin: origin)))
        }
        return withCORS(routeAPI(request, segments, origin: origin, caller: caller, client: client, now: now), origin: origin)
    }

    /// Who made a mutating call: the idempotency scope of its API key, and what its publishes
    /// are counted against.
    private struct Caller {
        var scope = ""
        var rateKey = ""
    }

    private func routeAPI(
        _ request: HTTPRequest, _ segments: [String], origin: String?, caller: Caller, client: String, now: UInt64
    ) -> RouteResult
    {
        let scope = caller.scope
        // A name that can never be a store's, a model's or a topic's is a bad request wherever it stands,
        // before any lookup or hook: never a 404, which would say it merely does not exist yet.
        if let invalid = APIRequestCheck.invalidName(segments) {
            return .reply(.error(.badRequest, invalid))
        }
        if let ignored = APIRequestCheck.unreadCondition(request, segments) { return .reply(.error(.badRequest, ignored)) }
        if let repeated = APIRequestCheck.repeatedParameter(request) { return .reply(.error(.badRequest, repeated)) }
        // A client's read that the subscribe hook decides (nil: none, or not such a read).
        let readTarget = clientReads?.target(of: request, segments)
        switch segments.first {
        case "publish" where segments.count == 1:
            // Every message takes one publish from the bucket, all of them or none, once the
            // batch is read: a batch larger than a full bucket is refused as such, whatever the
            // bucket holds now.
            return topicAPI.publishBatch(request, scope: scope) { extra in
                switch publisher.limiter.take(caller.rateKey, count: extra + 1, now: now) {
                case .allowed: return nil
                case .limited(let seconds):
                    counters.refused(.publishRate)
                    return ReplyError(.error(.tooManyRequests, "publish rate exceeded; retry after \(seconds) s",
                                             headers: [("Retry-After", "\(seconds)")]))
                case .beyondBurst:
                    counters.refused(.publishRate)
                    return ReplyError(.error(.tooManyRequests, "a batch of \(extra + 1) messages is more than the publish burst allows at once; send fewer in each"))
                }
            }
        case "stores" where segments.count == 3 && segments[2] == "presence":
            return presence(request, .store(segments[1]), client: client)
        case "topics" where segments.count == 3 && segments[2] == "presence":
            return presence(request, .topic(segments[1]), client: client)
        case "stores" where segments.count == 3 && segments[2] == "events":
            guard request.method == .get else { return .reply(.methodNotAllowed(request.method, allow: "GET")) }
            return stream(request, .store(segments[1]), origin: origin, client: client)
        case "topics" where segments.count == 3 && segments[2] == "events":
            guard request.method == .get else { return .reply(.methodNotAllowed(request.method, allow: "GET")) }
            return stream(request, .topic(segments[1]), origin: origin, client: client)
        case _ where readTarget != nil:
            let (reads, rest, target) = (clientReads!, segments.dropFirst(), readTarget!)
            return reads.route(request, target: target, client: client, then: { [storeAPI, topicAPI] allowed in
                // A topic's messages are read whole or not at all: nothing in them to narrow.
                if case .topic = target { return topicAPI.route(request, rest, scope: scope) }
                return storeAPI.route(request, rest, scope: scope, limit: allowed)
            }, perform: { result, handoff, done in Self.perform(result, handoff: handoff, done) })
        case "topics" where segments.count == 3 && segments[2] == "messages" && request.method == .post
            && clientPublishes?.decides(segments[1], rateKey: caller.rateKey) == true:
            // A job, so the connection's later requests wait for the hook and the publish, and its
            // publishes are numbered in the order it sent them.
            let gate = clientPublishes!.gate(request, topic: segments[1], client: client)
            return .job { [topicAPI] handoff, done in
                Self.perform(topicAPI.publish(segments[1], request, scope: scope, gate: gate), handoff: handoff, done)
            }
        case "stores": return storeAPI.route(request, segments.dropFirst(), scope: scope)
        case "topics": return topicAPI.route(request, segments.dropFirst(), scope: scope)
        case "jobs": return jobAPI.route(request, segments.dropFirst())
        default: return .reply(.error(.notFound, "no such API resource"))
        }
    }

    /// Who is subscribed is the subscribers' business: with API keys configured, only a holder of
    /// one may ask over HTTP (a browser follows presence through a subscription and its token).
    private func presence(_ request: HTTPRequest, _ target: StreamTarget, client: String) -> RouteResult {
        guard namespaces.allowsPresence(of: target.name) else {
            return .reply(.error(.forbidden, "presence is off for \(target) (its namespace)"))
        }
        if case .refused(let detail) = access.checkKey(request, client: client) {
            counters.refused(.apiKey)
            return .reply(.error(.unauthorized, detail, headers: [("WWW-Authenticate", "Bearer")]))
        }
        return presenceAPI.reply(request, target)
    }

    // MARK: Checks

    /// A mutating call needs the API key (when one is configured) and room in its publish bucket.
    /// Returns who the caller is, or the refusal.
    private func checkMutation(_ request: HTTPRequest, _ segments: [String], client: String, now: UInt64) -> Result<Caller, ReplyError> {
        switch request.method {
        case .post, .put, .patch, .delete: break
        default: return .success(Caller())
        }
        switch access.checkKey(request, client: client, grantable: Self.grantable(request, segments)) {
        case .refused(let detail):
            counters.refused(.apiKey)
            return .failure(ReplyError(.error(.unauthorized, detail, headers: [("WWW-Authenticate", "Bearer")])))
        case .forbidden(let detail):
            counters.refused(.apiKey)
            return .failure(ReplyError(.error(.forbidden, detail)))
        case .allowed(let rateKey, let scope):
            // A token's publish (a client's, not the backend's) obeys its topic's namespace.
            if rateKey.hasPrefix(AccessControl.tokenRateKeyPrefix), case .topic(let name)? = Self.grantable(request, segments),
               !namespaces.allowsClientPublish(to: name) {
                counters.refused(.tokenScope)
                return .failure(ReplyError(.error(.forbidden, "clients may not publish to '\(name)' (its namespace)")))
            }
            // A batch (`/api/publish`) takes its messages' share once it is read.
            let batch = segments == ["publish"]
            if !batch, case .limited(let seconds) = publisher.limiter.take(rateKey, now: now) {
                counters.refused(.publishRate)
                return .failure(ReplyError(.error(.tooManyRequests, "publish rate exceeded; retry after \(seconds) s",
                                                  headers: [("Retry-After", "\(seconds)")])))
            }
            return .success(Caller(scope: scope, rateKey: rateKey))
        }
    }

    /// What a token's grant may cover of a mutation: a store's models and change sets (`write`),
    /// or a topic's messages (`publish`); nil for the rest (creating or deleting a store, jobs,
    /// batches), which take the API key.
    static func grantable(_ request: HTTPRequest, _ segments: [String]) -> StreamTarget? {
        switch (segments.count, segments.first) {
        case (4, "stores") where segments[2] == "models", (3, "stores") where segments[2] == "changes":
            return .store(segments[1])
        case (3, "topics") where segments[2] == "messages" && request.method == .post:
            return .topic(segments[1])
        default:
            return nil
        }
    }

    /// What the connect hook needs to admit a connection that brought no token; nil if no
    /// connect hook is set.
    private func connectRequest(_ request: HTTPRequest, client: String) -> ConnectRequest? {
        guard access.connectHook else { return nil }
        return ConnectRequest(request, remoteAddress: client, forward: forwardHeaders)
    }

    private func stream(_ request: HTTPRequest, _ target: StreamTarget, origin: String?, client: String) -> RouteResult {
        if let draining = operations.refusingStreams { return .reply(draining) }
        if QueryFlag.value(StreamRequest.query(request, "presence")) != false, !namespaces.allowsPresence(of: target.name) {
            return .reply(.error(.forbidden, "presence is off for \(target) (its namespace)"))
        }
        var grant = StreamGrant(corsOrigin: origin, subscribeHook: subscribeHook)
        if access.requiresToken {
            let token = StreamRequest.query(request, "token") ?? AccessControl.bearer(request.headers[.authorization])
            if token == nil, let connect = connectRequest(request, client: client) {
                grant.connect = connect
                return StreamRequest.route(request, target: target, hub: hub, grant: grant)
            }
            switch checkToken(token) {
            case .failure(let failure): return .reply(failure.reply)
            case .success(let claims):
                // What the token does not cover, the subscribe hook may allow (the session asks it).
                guard claims.allows(target) || subscribeHook else {
                    counters.refused(.tokenScope)
                    return .reply(.error(.forbidden, "the token does not cover \(target)"))
                }
                grant.claims = claims
            }
        }
        return StreamRequest.route(request, target: target, hub: hub, grant: grant)
    }

    /// Verifies a subscription token, answering 401 for a missing, bad or expired one.
    private func checkToken(_ token: String?) -> Result<TokenClaims, ReplyError> {
        guard let token, !token.isEmpty else {
            counters.refused(.tokenMissing)
            return .failure(ReplyError(.error(.unauthorized, "a subscription token is required: ?token= or Authorization: Bearer")))
        }
        switch access.checkToken(token) {
        case .success(let claims):
            return .success(claims)
        case .failure(let failure):
            counters.refused(failure == .expired ? .tokenExpired : .tokenInvalid)
            return .failure(ReplyError(.error(.unauthorized, failure.description)))
        }
    }

    private func upgrade(_ request: HTTPRequest, _ mode: WebSocketSession.Mode, client: String) -> RouteResult {
        guard request.method == .get else { return .reply(.methodNotAllowed(request.method, allow: "GET")) }
        // A draining gateway takes no new streams; clients reconnect to another node.
        if let draining = operations.refusingStreams { return .reply(draining) }
        // Browsers always send Origin on a WebSocket upgrade; this is the guard against
        // cross-site WebSocket hijacking.
        if let refusal = refuseOrigin(request, origin: request.headers[.origin], "open a WebSocket here") {
            return .reply(refusal)
        }
        var grant = StreamGrant()
        guard access.requiresToken, mode == .push else { return .upgrade(mode, grant: grant) }
        if let token = StreamRequest.query(request, "token") {
            switch checkToken(token) {
            case .failure(let failure): return .reply(failure.reply)
            case .success(let verified): grant.claims = verified
            }
        } else {
            // Admitted by the connect hook, once the WebSocket is open; refused with close 1008.
            grant.connect = connectRequest(request, client: client)
        }
        return .upgrade(mode, grant: grant)
    }

    /// The 403 for a request whose `Origin` is not allowed to `action`, or nil when it may.
    /// `origin` is the request's `Origin` field.
    private func refuseOrigin(_ request: HTTPRequest, origin: String?, _ action: String) -> Reply? {
        // A page's own-origin reads carry no Origin: on loopback its Host alone tells a page that
        // pointed its name at the gateway (DNS rebinding).
        let host = request.headers[.host]
        if let host, !origins.allowsHost(host) {
            counters.refused(.origin)
            return .error(.forbidden, "this gateway listens on loopback and is not '\(host)'; list that origin with --allowed-origin")
        }
        // Without an Origin every other request is allowed.
        guard let origin, !origins.allows(origin: origin, host: host) else { return nil }
        counters.refused(.origin)
        return .error(.forbidden, "the origin \(origin) may not \(action); see --allowed-origin")
    }

    /// Answers a route decided later: at once, on a job thread, or when it answers.
    static func perform(_ result: RouteResult, handoff: JobHandoff, _ done: @escaping (Reply) -> Void) {
        switch result {
        case .reply(let reply): done(reply)
        case .later(let start): start(done)
        case .work(let work): handoff.run({ $0(work()) }, answer: done)
        case .job(let start): start(handoff, done)
        case .upgrade, .stream: done(.error(.badRequest, "not a read"))
        }
    }

    private func withCORS(_ result: RouteResult, origin: String?) -> RouteResult {
        guard origin != nil else { return result }
        let headers = origins.corsHeaders(origin: origin)
        switch result {
        case .reply(let reply):
            return .reply(reply.withHeaders(headers))
        case .work(let work):
            return .work { work().withHeaders(headers) }
        case .later(let start):
            return .later { done in start { done($0.withHeaders(headers)) } }
        case .job(let start):
            return .job { handoff, done in start(handoff) { done($0.withHeaders(headers)) } }
        case .upgrade, .stream:
            return result
        }
    }

    private func readOnly(_ request: HTTPRequest, _ body: () -> Reply) -> Reply {
        switch request.method {
        case .get, .head: body()
        default: .methodNotAllowed(request.method, allow: "GET, HEAD")
        }
    }
}
