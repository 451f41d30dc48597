import ReceptionistLoop
import ReceptionistSync
import ReceptionistWire

/// One HTTP/1.1 connection: parses requests, asks the router, writes replies in order.
///
/// Decisions about keep-alive, closing and timeouts come from `HTTPSessionState`; this type acts.
///
/// Loop thread only.
final class HTTPSession: TCPConnectionDelegate, GatewaySession {
    /// A protocol the connection switches to once the current request is answered.
    private enum Handover {
        case webSocket(WebSocketSession.Mode, response: [UInt8], grant: StreamGrant, deflate: PerMessageDeflate?)
        case stream(StreamTarget, since: UInt64?, epoch: String?, options: SubscriptionOptions, presence: Bool, grant: StreamGrant)
    }

    let connection: TCPConnection
    private let parser: HTTPRequestParser
    private var state: HTTPSessionState
    private let services: HTTPServices
    /// Replies owed, in request order; a reply from a job thread waits here for those before it.
    private var slots: [ResponseSlot] = []
    private var handover: Handover?
    /// A request is being routed: a `later` answer given at once is written when routing ends.
    private var answering = false

    init(connection: TCPConnection, services: HTTPServices) {
        self.connection = connection
        self.services = services
        let config = services.config
        parser = HTTPRequestParser(limits: config.parserLimits)
        state = HTTPSessionState(
            now: connection.loop.nowMilliseconds,
            idleTimeoutMilliseconds: UInt64(config.idleTimeoutSeconds * 1000),
            headTimeoutMilliseconds: UInt64(config.headTimeoutSeconds * 1000))
        connection.highWaterBytes = config.maxQueuedBytes
        connection.delegate = self
    }

    func start() {
        connection.startReading()
    }

    // MARK: TCPConnectionDelegate

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !state.closing || state.phase != .idle else { return }
        let output = parser.parse(bytes)
        state.received(phase: parser.phase, now: connection.loop.nowMilliseconds)
        for request in output.requests {
            answer(request)
            if state.closing || handover != nil { break }
        }
        if let handover {
            hand(over: handover, remainder: output.upgradeRemainder ?? [])
            return
        }
        if let error = output.error {
            // Answered after the replies already owed; nothing after it on this stream is trusted.
            services.logger.debug("rejected request", metadata: ["status": "\(error.status.code)", "detail": "\(error.detail)"])
            let slot = ResponseSlot(method: .get, target: "-", keepAlive: false)
            slot.fill(Reply(.error(error)))
            slots.append(slot)
            state.failed()
            writeReadyReplies()
        } else if output.upgradeRemainder != nil {
            // No protocol switch is offered here; the answer above is the last on this stream.
            state.failed()
        }
        closeIfDone()
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        // The peer sent everything it will send; whatever is queued still goes out.
        connection.closeAfterFlush()
    }

    func connectionDidDrain(_ connection: TCPConnection) {
        connection.startReading()
    }

    func connectionDidClose(_ connection: TCPConnection) {
        services.table.sessionDidClose(connection)
    }

    // MARK: Acting

    private func answer(_ request: HTTPRequest) {
        // An answer given while the route is still running is written below, with the others.
        answering = true
        defer { answering = false }
        let slot = ResponseSlot(
            method: request.method, target: request.target,
            keepAlive: state.requestCompleted(keepAlive: request.keepAlive && !request.isUpgrade))
        slots.append(slot)
        let now = connection.loop.nowMilliseconds
        services.counters.httpRequests += 1
        switch services.router.route(request, client: connection.peerAddress ?? "unknown", now: now) {
        case .reply(let reply):
            slot.fill(reply)
        case .upgrade(let mode, let grant):
            guard slots.count == 1 else {
                return fill(slot, .error(.badRequest, "answers to earlier requests are still owed; upgrade on a fresh request"))
            }
            let supported = mode == .push ? ["receptionist.v1"] : []
            switch WebSocketHandshake.accept(request, supported: supported, compression: services.streams.compression != nil) {
            case .success(let accepted):
                slots.removeAll()
                handover = .webSocket(mode, response: accepted.response, grant: grant, deflate: accepted.deflate)
            case .failure(let refusal):
                slot.fill(Reply(.error(refusal.status, refusal.detail, headers: refusal.headers), closesConnection: true))
            }
        case .stream(let target, let since, let epoch, let options, let presence, let grant):
            guard slots.count == 1 else {
                return fill(slot, .error(.badRequest, "answers to earlier requests are still owed; stream on a fresh request"))
            }
            slots.removeAll()
            handover = .stream(target, since: since, epoch: epoch, options: options, presence: presence, grant: grant)
        case .later(let start):
            start(door(for: slot))
        case .work(let work):
            JobHandoff(jobs: services.jobs, mailbox: services.mailbox).run({ $0(work()) }, answer: door(for: slot))
        }
        writeReadyReplies()
    }

    /// The door for a reply given later, on the loop: it fills `slot` and, unless the session is
    /// in the middle of answering already, writes what is ready (`slotFilled`).
    private func door(for slot: ResponseSlot) -> (Reply) -> Void {
        slot.session = self
        return slot.answer
    }

    private func fill(_ slot: ResponseSlot, _ reply: Reply) {
        slot.fill(reply)
        writeReadyReplies()
    }

    /// Gives the connection to a WebSocket or SSE session; this session is done with it.
    private func hand(over handover: Handover, remainder: [UInt8]) {
        switch handover {
        case .webSocket(let mode, let response, let grant, let deflate):
            connection.write(response)
            let session = WebSocketSession(
                connection: connection, services: services.streams, mode: mode, claims: grant.claims, deflate: deflate)
            services.table.replaceSession(of: connection, with: session)
            session.start(remainder: remainder, connect: grant.connect)
        case .stream(let target, let since, let epoch, let options, let presence, let grant):
            let session = SSESession(connection: connection, services: services.streams, claims: grant.claims)
            services.table.replaceSession(of: connection, with: session)
            session.start(
                target, since: since, epoch: epoch, options: options, presence: presence, date: services.dateCache.current,
                grant: grant)
        }
    }

    /// A slot's reply came later (`ResponseSlot.answer`): written now, unless routing is under way.
    func slotFilled() {
        guard !answering else { return }
        writeReadyReplies()
        closeIfDone()
    }

    /// Writes replies from the front of the queue while they are ready.
    private func writeReadyReplies() {
        while let slot = slots.first, let reply = slot.reply {
            slots.removeFirst()
            guard connection.state == .open else { continue }
            let keepAlive = slot.keepAlive && !reply.closesConnection
            if !keepAlive { state.failed() }
            services.logger.debug(
                "\(slot.method.name) \(Self.redacted(slot.target)) \(reply.response.status.code)",
                metadata: ["peer": "\(connection.peerAddress ?? "?")"])
            send(reply, headOnly: slot.method == .head, keepAlive: keepAlive && !(state.closing && slots.isEmpty))
        }
    }

    /// The target with a `token=` value hidden: subscription tokens are credentials, and logs
    /// travel further than the gateway.
    static func redacted(_ target: String) -> String {
        guard let query = target.firstIndex(of: "?") else { return target }
        let pairs = target[target.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false)
        return String(target[...query]) + pairs.map { $0.hasPrefix("token=") ? "token=…" : String($0) }.joined(separator: "&")
    }

    private func closeIfDone() {
        if slots.isEmpty && state.afterResponse() == .close {
            connection.closeAfterFlush()
        }
    }

    private func send(_ reply: Reply, headOnly: Bool, keepAlive: Bool) {
        let date = services.dateCache.current
        let length = reply.contentLength
        let result: TCPConnection.WriteResult
        if headOnly || length == 0 {
            result = connection.write(
                HTTPResponseEncoder.head(reply.response, date: date, keepAlive: keepAlive, contentLength: length))
        } else if let shared = reply.sharedBody, length > HTTPResponseEncoder.inlineBodyLimit {
            // A large shared body goes out as its own buffer in the same writev, never copied.
            connection.write(
                HTTPResponseEncoder.head(reply.response, date: date, keepAlive: keepAlive, contentLength: length))
            result = connection.write(shared)
        } else {
            // Head and body written straight into the buffer that is sent.
            func whole(_ body: UnsafeRawBufferPointer) -> SharedBytes {
                let count = HTTPResponseEncoder.headCount(
                    reply.response, date: date, keepAlive: keepAlive, contentLength: length, inlineBody: body)
                return SharedBytes(count: count) { start in
                    _ = HTTPResponseEncoder.writeHead(
                        reply.response, date: date, keepAlive: keepAlive, contentLength: length, inlineBody: body, at: start)
                }
            }
            let bytes = reply.sharedBody.map { $0.withUnsafeBytes(whole) } ?? reply.response.body.withUnsafeBytes(whole)
            result = connection.write(bytes)
        }
        // Policy for a full outbound queue: stop reading requests until the client catches up.
        if result == .backpressure {
            connection.stopReading()
        }
    }

    /// The gateway is draining.
    func drain() {
        if state.drain() == .close && slots.isEmpty {
            connection.closeAfterFlush()
        }
    }

    /// Periodic check of timeouts.
    func sweep(now: UInt64) {
        // A request waiting on a job thread is not idle.
        guard slots.isEmpty else { return }
        switch state.deadline(now: now) {
        case .none:
            break
        case .close:
            connection.closeAfterFlush()
        case .timeOut:
            state.failed()
            send(Reply(.error(.requestTimeout, "the request did not arrive in time")), headOnly: false, keepAlive: false)
            connection.closeAfterFlush()
        }
    }

    var transport: SessionTransport { .http }

    /// Refuses the connection at once (over a connection limit).
    func refuse(_ status: HTTPStatus, _ detail: String) {
        state.failed()
        send(Reply(.error(status, detail)), headOnly: false, keepAlive: false)
        connection.closeAfterFlush()
    }
}
