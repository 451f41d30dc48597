import ReceptionistLoop
import ReceptionistSync
import ReceptionistWire

/// One HTTP/1.1 connection: parses requests, asks the router, writes replies in order.
///
/// Decisions about keep-alive, closing and timeouts come from `HTTPSessionState`; this type acts.
///
/// Loop thread only.
final class HTTPSession: TCPConnectionDelegate, GatewaySession {
    let connection: TCPConnection
    private let parser: HTTPRequestParser
    private var state: HTTPSessionState
    let services: HTTPServices
    /// Replies owed, in request order; a reply from a job thread waits here for those before it.
    private var slots: [ResponseSlot] = []
    private var handover: Handover?
    /// A request is being routed: a `later` answer given at once is written when routing ends.
    private var answering = false
    /// The last request whose job-thread work the requests after it wait for (`process`).
    private var held: JobHold?
    /// Bytes read while held, parsed once it ends: at most one read, as reading stops then.
    private var heldBytes: [UInt8] = []
    /// Reading is stopped until the held request's work returns, or the client takes the replies
    /// queued before the requests `parked` keeps.
    private var readingHeld = false
    /// Requests read but not yet answered while the replies before them are past
    /// `--max-queued-bytes`: answered once the client has taken those (`connectionDidDrain`), so
    /// one read of small pipelined requests cannot queue a large reply for each.
    private var parked: (requests: ArraySlice<HTTPRequest>, output: HTTPRequestParser.Output)?
    /// Bytes of replies handed to the connection, and how many of them the client had taken when
    /// a deadline last came: a client that has taken more since is taking its replies, and is
    /// not idle however long one takes it.
    var written = 0
    /// Over `--max-connections`: only the operations endpoints are answered (`startOperationsOnly`).
    private var operationsOnly = false
    private var takenAtDeadline = 0

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

    /// Starts a connection over `--max-connections` that may ask for `/healthz`, `/readyz` or
    /// `/metrics` only: answered once, then closed; anything else is `503 over_capacity`.
    func startOperationsOnly() {
        operationsOnly = true
        start()
    }

    // MARK: TCPConnectionDelegate

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        if let hold = held {
            // Only now does anything wait for the held request's work, and reading stop.
            if hold.whenEnded({ [weak self] in self?.parseHeldBytes() }) {
                heldBytes.append(contentsOf: bytes)
                holdReading()
                return
            }
            held = nil
        }
        guard state.takesRequests else { return }
        let output = parser.parse(bytes)
        state.received(phase: parser.phase, completed: !output.requests.isEmpty, now: connection.loop.nowMilliseconds)
        process(output.requests[...], output)
        continueIfAsked()
    }

    /// Answers `requests` in order, then acts on the rest of `output`. A request whose work runs
    /// on a job thread holds back everything after it, read or not yet read, until that work has
    /// returned: pipelined commits take their places in their stores in the order they were sent.
    /// Replies past `--max-queued-bytes` hold back the requests after them too (`parked`), those
    /// handed to the connection and those made but waiting behind an earlier reply alike.
    private func process(_ requests: ArraySlice<HTTPRequest>, _ output: HTTPRequestParser.Output) {
        var rest = requests
        while !rest.isEmpty {
            if connection.isOverHighWater || repliesWaitPastTheLimit {
                parked = (rest, output)
                holdReading()
                return
            }
            let request = rest.removeFirst()
            if let hold = answer(request) {
                held = hold
                // Nothing else read yet: bytes that come later wait for it (above).
                if rest.isEmpty { break }
                if hold.whenEnded({ [weak self] in self?.resume(rest, output) }) {
                    holdReading()
                    return
                }
                held = nil
            }
            if state.closing || handover != nil { break }
        }
        if let handover {
            hand(over: handover, remainder: output.upgradeRemainder ?? [])
            return
        }
        if let error = output.error {
            // Answered after the replies already owed; nothing after it on this stream is trusted.
            // After a request that closes the stream, nothing more is answered at all.
            if !state.closing {
                services.logger.debug("rejected request", metadata: ["status": "\(error.status.code)", "detail": "\(error.detail)"])
                let slot = ResponseSlot(method: parser.headRequest ? .head : .get, target: "-", keepAlive: false)
                slot.fill(Reply(.error(error)))
                slots.append(slot)
            }
            state.failed()
            writeReadyReplies()
        } else if output.upgradeRemainder != nil {
            // No protocol switch is offered here; the answer above is the last on this stream.
            state.failed()
        }
        closeIfDone()
    }

    /// The held request's work returned: the requests read after it go on.
    private func resume(_ rest: ArraySlice<HTTPRequest>, _ output: HTTPRequestParser.Output) {
        held = nil
        guard connection.state == .open else { return }
        releaseReading()
        // A request answered with `Connection: close` ends the stream, as in `process`.
        process(state.closing ? [] : rest, output)
    }

    /// The held request's work returned: the bytes read meanwhile are parsed now.
    private func parseHeldBytes() {
        held = nil
        let bytes = heldBytes
        heldBytes = []
        guard connection.state == .open else { return }
        releaseReading()
        bytes.withUnsafeBytes { connection(connection, didRead: $0) }
        // Bytes after a closing request are not parsed, and so reach no `closeIfDone` of their own.
        closeIfDone()
    }

    private func holdReading() {
        readingHeld = true
        connection.stopReading()
    }

    /// Reads again, unless replies wait for the client to take them (`connectionDidDrain` will).
    private func releaseReading() {
        readingHeld = false
        if !connection.isOverHighWater { connection.startReading() }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        // The peer sent everything it will send (it may still read): the requests it sent are
        // answered, those held back included, and the connection closes after the last answer.
        closeIfDone()
    }

    func connectionDidDrain(_ connection: TCPConnection) {
        if parked != nil {
            // The client took the replies queued before them: the parked requests go on, and the
            // idle time-out counts from now (one that never reads is closed by it).
            state.progressed(now: connection.loop.nowMilliseconds)
            return resumeParked()
        }
        if !readingHeld { connection.startReading() }
    }

    /// The parked requests go on once there is room: the connection under its limit, and the
    /// replies waiting behind an earlier one too.
    private func resumeParked() {
        guard let (rest, output) = parked, !connection.isOverHighWater, !repliesWaitPastTheLimit else { return }
        parked = nil
        releaseReading()
        process(state.closing ? [] : rest, output)
    }

    /// Replies made but not yet written, as they wait behind an earlier one still owed (a publish
    /// on its way to the disk or Redis), past `--max-queued-bytes` or `maxOpenSlots`: each would
    /// be held whole until the earlier one came, beyond any limit.
    private var repliesWaitPastTheLimit: Bool {
        guard slots.count > 1 else { return false }
        if slots.count >= Self.maxOpenSlots { return true }
        var bytes = 0
        for slot in slots {
            bytes += slot.reply?.contentLength ?? 0
            if bytes >= connection.highWaterBytes { return true }
        }
        return false
    }

    /// The most requests a connection has under way (answered or not, and not yet written).
    static let maxOpenSlots = 256

    func connectionDidClose(_ connection: TCPConnection) {
        services.table.sessionDidClose(connection)
    }

    // MARK: Acting

    /// Routes `request`; returns the hold on its job-thread work that the next request waits for.
    private func answer(_ request: HTTPRequest) -> JobHold? {
        // An answer given while the route is still running is written below, with the others.
        answering = true
        defer { answering = false }
        let slot = ResponseSlot(
            method: request.method, target: request.target,
            keepAlive: state.requestCompleted(keepAlive: request.keepAlive && !request.isUpgrade && !operationsOnly))
        slots.append(slot)
        let now = connection.loop.nowMilliseconds
        services.counters.httpRequests += 1
        if operationsOnly, !services.router.asksOperations(request) {
            services.counters.refused(.connectionLimit)
            fill(slot, Reply(.error(.overCapacity, "too many connections"), closesConnection: true))
            return nil
        }
        switch services.router.route(request, client: connection.peerAddress ?? "unknown", now: now) {
        case .reply(let reply):
            slot.fill(reply)
        case .upgrade(let mode, let grant):
            guard slots.count == 1 else {
                fill(slot, .error(.badRequest, "answers to earlier requests are still owed; upgrade on a fresh request"))
                return nil
            }
            let supported = mode == .push ? ["receptionist.v1"] : []
            switch WebSocketHandshake.accept(request, supported: supported, compression: services.streams.compression != nil) {
            case .success(let accepted):
                logAnswer(slot, HTTPStatus.switchingProtocols.code)
                slots.removeAll()
                handover = .webSocket(mode, response: accepted.response, grant: grant, deflate: accepted.deflate)
            case .failure(let refusal):
                slot.fill(Reply(.error(refusal.status, refusal.detail, headers: refusal.headers), closesConnection: true))
            }
        case .stream(let target, let ask, let grant):
            guard slots.count == 1 else {
                fill(slot, .error(.badRequest, "answers to earlier requests are still owed; stream on a fresh request"))
                return nil
            }
            logAnswer(slot, HTTPStatus.ok.code)
            slots.removeAll()
            handover = .stream(target, ask, grant: grant)
        case .later(let start):
            start(door(for: slot))
        case .work(let work):
            return startHeld(slot) { handoff, done in handoff.run({ $0(work()) }, answer: done) }
        case .job(let start):
            return startHeld(slot, start)
        }
        // A reply that closes the connection ends it here: nothing after the request is taken,
        // though an earlier reply still owed holds its writing back.
        if slot.reply?.closesConnection == true { state.failed() }
        writeReadyReplies()
        return nil
    }

    /// Starts `start` on `slot`, with a handoff that tells the hold returned of its work; nil when
    /// the hold has ended already (answered at once, or refused).
    private func startHeld(_ slot: ResponseSlot, _ start: (JobHandoff, @escaping (Reply) -> Void) -> Void) -> JobHold? {
        let hold = JobHold()
        slot.hold = hold
        start(services.handoff.inOrder(hold), door(for: slot))
        writeReadyReplies()
        return hold.ended ? nil : hold
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

    /// A slot's reply came later (`ResponseSlot.answer`): written now, unless routing is under way.
    func slotFilled() {
        guard !answering else { return }
        writeReadyReplies()
        if parked != nil, held == nil { resumeParked() }
        closeIfDone()
    }

    /// Writes replies from the front of the queue while they are ready.
    private func writeReadyReplies() {
        while let slot = slots.first, let reply = slot.reply {
            slots.removeFirst()
            guard connection.state == .open else { continue }
            let keepAlive = slot.keepAlive && !reply.closesConnection
            if !keepAlive { state.failed() }
            logAnswer(slot, reply.response.status.code)
            send(reply, headOnly: slot.method == .head, keepAlive: keepAlive && !(state.closing && slots.isEmpty))
            // Nothing follows a reply that says `Connection: close` (RFC 9112, section 9.6).
            if !keepAlive { slots.removeAll() }
        }
        if parser.awaitsContinue { continueIfAsked() }
    }

    /// The debug log's line for a request answered: a reply, or a stream it became.
    private func logAnswer(_ slot: ResponseSlot, _ status: Int) {
        services.logger.debug("\(slot.method.name) \(slot.redactedTarget) \(status)", metadata: ["peer": "\(connection.peerAddress ?? "?")"])
    }

    /// A request that waits for `100 Continue` before it sends its body (RFC 9110, section
    /// 10.1.1) gets it once it is the one being answered: no reply owed before it, and the
    /// gateway reading.
    private func continueIfAsked() {
        guard parser.awaitsContinue, slots.isEmpty, !readingHeld, !state.closing, connection.state == .open else { return }
        parser.continueSent()
        write(SharedBytes(Self.continueLine))
    }

    private static let continueLine: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// Closes once every reply owed is queued and nothing read waits behind a held request, if the
    /// stream is ending: a closing request answered, or the client's side shut down.
    private func closeIfDone() {
        guard slots.isEmpty, !readingHeld else { return }
        if connection.peerFinished || state.afterResponse() == .close {
            connection.closeAfterFlush()
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
        // Nor is a request late that the gateway itself does not read, its replies waiting for the
        // client: only a client that takes nothing for the idle time-out is closed then.
        let held = readingHeld || connection.isOverHighWater
        if held { state.readingHeld(now: now) }
        let action = state.deadline(now: now, readingHeld: held)
        guard action != .none else { return }
        // Nor is a client that has taken some of its replies since the last deadline, however
        // slowly it reads (asked of the kernel only now, once a time-out).
        let taken = written - connection.unsentBytes
        if taken > takenAtDeadline {
            takenAtDeadline = taken
            state.progressed(now: now)
            return
        }
        switch action {
        case .none:
            break
        case .close:
            // Asked to close a time-out ago, and the client has taken nothing since: it would hold
            // its replies, and the connection, for good.
            if connection.closesWhenFlushed { return connection.close() }
            connection.closeAfterFlush()
            state.progressed(now: now)
        case .timeOut:
            state.failed()
            send(Reply(.error(.requestTimeout, "the request did not arrive in time")), headOnly: parser.headRequest, keepAlive: false)
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
