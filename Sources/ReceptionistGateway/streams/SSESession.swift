import ReceptionistLoop
import ReceptionistPush
import ReceptionistWire

/// One `text/event-stream` response: a single subscription streamed until either side ends it.
///
/// The response has no length and says `Connection: close`, so the stream is delimited by the
/// connection itself; nothing the client sends after its request is read. The heartbeat and the
/// goodbye are decided by `SSESessionState`; the subscription, the outbound limit and the token's
/// expiry are `StreamSession`'s.
///
/// Loop thread only.
final class SSESession: StreamSession {
    let connection: TCPConnection
    var core: StreamCore
    private var state: SSESessionState
    /// Whether the `200` head went out. Until then a hook is deciding, and the answer to anything
    /// (a drain) is an HTTP status, never an event or a heartbeat before the head.
    private var headSent = false
    /// The request's `Date`, for a status given before the head.
    private var date = ""
    /// How the heartbeat is written: a comment, or an event the page hears (`?heartbeat=event`).
    private var heartbeat = StreamAsk.Heartbeat.comment
    /// The allowed cross-origin page that asked (`StreamGrant.corsOrigin`): a status given before
    /// the head names it too, so that the page can read why it was refused.
    private var corsOrigin: String?

    init(connection: TCPConnection, services: StreamServices, claims: TokenClaims?) {
        self.connection = connection
        core = StreamCore(services: services, claims: claims)
        state = SSESessionState(
            now: connection.loop.nowMilliseconds, heartbeatMilliseconds: UInt64(services.config.sseHeartbeatSeconds * 1000),
            lingerMilliseconds: services.webSocketTiming.closeTimeoutMilliseconds)
        connection.highWaterBytes = services.config.maxQueuedBytes
        connection.delaysWrites = true
    }

    /// The stream's one subscription was ended by the gateway (its store deleted): nothing more
    /// will come on it, so the stream ends once what it was told is sent, and the client's
    /// `EventSource` hears the end rather than heartbeats for good.
    func subscriptionEnded(_ subscription: Subscription) {
        _ = core.subscriptions.remove(where: { $0 === subscription })
        if core.subscriptions.isEmpty, state.ending(now: connection.loop.nowMilliseconds) { connection.closeAfterFlush() }
    }

    /// Takes the connection over from HTTP and starts the stream. The target was checked already
    /// (the token covers it, and the hub can serve it), unless the connect hook must admit the
    /// connection first: then its answer is awaited, and a refusal is still an HTTP status.
    func start(_ target: StreamTarget, _ ask: StreamAsk, date: String, grant: StreamGrant) {
        connection.delegate = self
        heartbeat = ask.heartbeat
        self.date = date
        corsOrigin = grant.corsOrigin
        let stream = { [unowned self] (options: SubscriptionOptions, granted: Bool) in
            // A refusal known now is a status, not a `200` and an empty stream.
            if let problem = services.hub.refusal(target, options: options) {
                let status: HTTPStatus = switch problem.code {
                case .tooManySubscriptions: .tooManyRequests
                case .noSuchStore: .notFound
                case .unavailable: .overCapacity
                default: .badRequest
                }
                return refuse(status, problem.message, date: date)
            }
            connection.write(Self.head(date: date, corsOrigin: grant.corsOrigin))
            headSent = true
            // A client that hears its heartbeats learns their interval before the stream's first
            // quiet spell, and can time the gateway out from the start.
            if heartbeat == .event { writeHeartbeat() }
            if subscribe(target, since: ask.since, epoch: ask.epoch, options: options, presence: ask.presence, granted: granted) != nil {
                _ = state.ending(now: connection.loop.nowMilliseconds)
                connection.closeAfterFlush()
            }
        }
        // What the stream's grant does not cover, the subscribe hook may allow, narrowed.
        let authorize = { [unowned self] in
            guard needsSubscribeHook(target, presence: ask.presence) else {
                if let claims = core.claims, !claims.allows(target) || (ask.presence && !claims.allowsPresence(of: target)) {
                    services.counters.refused(.tokenScope)
                    return refuse(.forbidden, "the grant does not cover \(target)\(ask.presence ? " and its presence" : "")", date: date)
                }
                return stream(ask.options, false)
            }
            askSubscribeHook(target, options: ask.options, presence: ask.presence) { [weak self] result in
                switch result {
                case .success(let narrowed): stream(narrowed, true)
                case .failure(let problem):
                    self?.refuse(problem.code == .unavailable ? .serviceUnavailable : .forbidden, problem.message, date: date)
                }
            }
        }
        guard let connect = grant.connect else { return authorize() }
        askConnectHook(connect) { [weak self] decision in
            guard let self else { return }
            switch decision {
            case .admit(let claims):
                core.claims = claims
                core.grantFromHook = true
                authorize()
            case .refuse(let status, let reason):
                refuse(status == 401 ? .unauthorized : .forbidden, reason, date: date)
            case .unavailable(let why):
                refuse(.serviceUnavailable, why, date: date)
            }
        }
    }

    /// Answers the request with an error instead of the stream, and closes.
    private func refuse(_ status: HTTPStatus, _ detail: String, date: String) {
        guard state.ending(now: connection.loop.nowMilliseconds) else { return }
        var response = HTTPResponse.error(status, detail)
        if let corsOrigin {
            response.headers.add("Access-Control-Allow-Origin", corsOrigin)
            response.headers.add("Vary", "Origin")
        }
        connection.write(response.body.withUnsafeBytes {
            HTTPResponseEncoder.head(response, date: date, keepAlive: false, contentLength: response.body.count, inlineBody: $0)
        })
        connection.closeAfterFlush()
    }

    /// `corsOrigin` was checked against the allow-list already; it contains no CR or LF, since
    /// the request parser refuses those in header values.
    static func head(date: String, corsOrigin: String? = nil) -> [UInt8] {
        let cors = corsOrigin.map { "Access-Control-Allow-Origin: \($0)\r\nVary: Origin\r\n" } ?? ""
        return Array(("HTTP/1.1 200 OK\r\nDate: \(date)\r\nContent-Type: text/event-stream\r\n"
            + "Cache-Control: no-store\r\nX-Accel-Buffering: no\r\n\(cors)Connection: close\r\n\r\n").utf8)
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {}

    // MARK: StreamSession

    var isWritable: Bool { connection.state == .open && !state.ended }

    func write(_ event: PushEvent) {
        services.counters.sseMessagesOut += event.messageCount
        connection.write(event.sseEvent)
        state.wrote(now: connection.loop.nowMilliseconds)
    }

    func end(_ reason: StreamEnd) {
        guard state.ending(now: connection.loop.nowMilliseconds) else { return }
        switch reason {
        case .slowConsumer:
            // No close frame exists in SSE: the stream ends and the client resumes with Last-Event-ID.
            connection.close()
        case .tokenExpired:
            connection.write(SSEEncoder.event("error", id: nil, data: PushEncoder.error(AccessControl.expiredProblem)))
            connection.closeAfterFlush()
        case .grantRefused(let reason):
            connection.write(SSEEncoder.event("error", id: nil, data: PushEncoder.error(ClientMessage.Problem(.tokenExpired, reason))))
            connection.closeAfterFlush()
        }
    }

    // MARK: GatewaySession

    var transport: SessionTransport { .sse }

    /// Ends the stream with a `draining` event whose `retry:` spreads the reconnections
    /// (`EventSource` honours it), then closes once everything queued is written.
    func drain() {
        guard connection.state == .open else { return }
        guard headSent else { return refuse(.serviceUnavailable, "the gateway is draining; retry", date: date) }
        guard state.ending(now: connection.loop.nowMilliseconds) else { return }
        let delay = services.reconnectJitterMilliseconds()
        connection.write(SSEEncoder.retry(milliseconds: delay))
        connection.write(SSEEncoder.event("draining", id: nil, data: PushEncoder.draining(reconnectAfterMilliseconds: delay)))
        connection.closeAfterFlush()
    }

    func sweep(now: UInt64) {
        // A hook is still deciding: its answer is the status, within the hook's time-out.
        guard headSent || state.ended else { return }
        if !state.ended, expireTokenIfDue() { return }
        if !state.ended { refreshIfDue() }
        switch state.tick(now: now) {
        case .none: break
        case .heartbeat:
            // Bytes still queued reach the client first, and tell it the stream lives: a
            // heartbeat behind them adds nothing, and would grow a stalled client's queue.
            guard connection.queuedBytes == 0 else { break }
            switch heartbeat {
            case .comment: connection.write(SSEEncoder.heartbeat)
            case .event: writeHeartbeat()
            }
        case .abort:
            // Said goodbye a linger ago, and not yet read: closed, unless the peer still takes
            // bytes (a slow link reading a long backlog), as a WebSocket's close is.
            if services.closeWaits.peerStillReads(
                connection, unsent: connection.unsentBytes, now: now, timeout: state.lingerMilliseconds) { break }
            connection.close()
        }
    }

    private func writeHeartbeat() {
        connection.write(SSEEncoder.heartbeatEvent(intervalMilliseconds: state.heartbeatMilliseconds))
        state.wrote(now: connection.loop.nowMilliseconds)
    }
}
