/// Decides an SSE stream's heartbeat and its one goodbye; `SSESession` acts.
///
/// Time is injected (loop milliseconds) so every deadline is testable without waiting.
struct SSESessionState {
    enum Action: Equatable {
        case none
        /// Write a comment line: nothing has been sent for a heartbeat interval, and proxies and
        /// browsers would otherwise take the quiet stream for a dead one.
        case heartbeat
    }

    let heartbeatMilliseconds: UInt64
    private var lastWrite: UInt64
    /// The stream has said goodbye (drained, expired or ended); nothing else is written.
    private(set) var ended = false

    init(now: UInt64, heartbeatMilliseconds: UInt64) {
        self.heartbeatMilliseconds = heartbeatMilliseconds
        lastWrite = now
    }

    /// Something was written: the heartbeat waits a whole interval again.
    mutating func wrote(now: UInt64) {
        lastWrite = now
    }

    /// Records the goodbye. Returns false if one was already said (say only one).
    mutating func ending() -> Bool {
        guard !ended else { return false }
        ended = true
        return true
    }

    mutating func tick(now: UInt64) -> Action {
        guard !ended, now &- lastWrite >= heartbeatMilliseconds else { return .none }
        lastWrite = now
        return .heartbeat
    }
}
