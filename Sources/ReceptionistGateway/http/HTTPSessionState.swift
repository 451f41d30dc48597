import ReceptionistWire

/// Decides what an HTTP connection does next; `HTTPSession` carries the decisions out.
///
/// Time is injected (loop milliseconds) so every timeout is testable without waiting.
struct HTTPSessionState {
    enum Action: Equatable {
        case none
        /// Close after what is queued has been sent.
        case close
        /// Answer 408 and close: the request did not arrive in time.
        case timeOut
    }

    let idleTimeoutMilliseconds: UInt64
    let headTimeoutMilliseconds: UInt64

    private(set) var phase: HTTPRequestParser.Phase = .idle
    private var phaseSince: UInt64
    private var lastActivity: UInt64
    /// No more requests will be answered after the current one (client asked, error, or drain).
    private(set) var closing = false
    /// A request was answered while closing (or the stream failed): no later request is taken,
    /// not even one whose head came in the same read. A drain's `closing` alone still lets the
    /// request in progress finish.
    private var finished = false

    /// Whether a request read now may still be taken.
    var takesRequests: Bool { !finished && (!closing || phase != .idle) }

    init(now: UInt64, idleTimeoutMilliseconds: UInt64, headTimeoutMilliseconds: UInt64) {
        self.idleTimeoutMilliseconds = idleTimeoutMilliseconds
        self.headTimeoutMilliseconds = headTimeoutMilliseconds
        phaseSince = now
        lastActivity = now
    }

    /// Bytes were parsed, `completed` whether they ended a request; the parser is now in `phase`.
    /// A head that follows a request completed in the same read is a new one: its time starts now.
    mutating func received(phase newPhase: HTTPRequestParser.Phase, completed: Bool = false, now: UInt64) {
        if newPhase != phase || completed {
            phase = newPhase
            phaseSince = now
        }
        lastActivity = now
    }

    /// The client took replies queued for it: a connection that reads slowly is not idle.
    mutating func progressed(now: UInt64) {
        lastActivity = now
    }

    /// The gateway is not reading the connection (its replies wait for the client, or a request's
    /// work holds back what follows): the request being read cannot be late meanwhile, and its
    /// time starts again when reading does.
    mutating func readingHeld(now: UInt64) {
        phaseSince = now
    }

    /// A request is complete. Returns whether its response may keep the connection open.
    mutating func requestCompleted(keepAlive: Bool) -> Bool {
        if !keepAlive { closing = true }
        if closing { finished = true }
        return !closing
    }

    /// Nothing more will be read from this stream: answer what is owed and close.
    mutating func failed() {
        closing = true
        finished = true
        phase = .idle
    }

    /// The gateway is draining: finish the request in progress, if any, then close.
    mutating func drain() -> Action {
        closing = true
        return phase == .idle ? .close : .none
    }

    /// After a response has been queued: whether the connection is done.
    func afterResponse() -> Action {
        // Finished, a request begun after the last one taken is never taken: not waited for.
        finished || (closing && phase == .idle) ? .close : .none
    }

    /// Called periodically by the gateway's sweep; `readingHeld` while the gateway does not read
    /// the connection, when only a client that takes nothing for the idle time-out is closed.
    func deadline(now: UInt64, readingHeld: Bool = false) -> Action {
        if readingHeld { return now &- lastActivity >= idleTimeoutMilliseconds ? .close : .none }
        switch phase {
        case .idle:
            return now &- lastActivity >= idleTimeoutMilliseconds ? .close : .none
        case .head:
            return now &- phaseSince >= headTimeoutMilliseconds ? .timeOut : .none
        case .body:
            // A body has the idle time-out to arrive whole, however slowly it trickles (a
            // 1 MiB body at 17 KB/s by default): one byte now and then holds no connection.
            return now &- phaseSince >= idleTimeoutMilliseconds ? .timeOut : .none
        }
    }
}
