/// Decides an SSE stream's heartbeat and its one goodbye; `SSESession` acts.
///
/// Time is injected (loop milliseconds) so every deadline is testable without waiting.
struct SSESessionState {
    enum Action: Equatable {
        case none
        /// Write a comment line: nothing has been sent for a heartbeat interval, and proxies and
        /// browsers would otherwise take the quiet stream for a dead one.
        case heartbeat
        /// The goodbye was said a linger ago and the stream is still not closed: its client has
        /// not read what was queued before it. Close it, unless the peer is still reading.
        case abort
    }

    let heartbeatMilliseconds: UInt64
    /// How long a stream that said goodbye may take to be read before it is closed (`--linger`).
    let lingerMilliseconds: UInt64
    private var lastWrite: UInt64
    /// When the stream said goodbye (drained, expired, refused or ended); nothing else is written
    /// after it.
    private var endedAt: UInt64?

    var ended: Bool { endedAt != nil }

    init(now: UInt64, heartbeatMilliseconds: UInt64, lingerMilliseconds: UInt64) {
        self.heartbeatMilliseconds = heartbeatMilliseconds
        self.lingerMilliseconds = lingerMilliseconds
        lastWrite = now
    }

    /// Something was written: the heartbeat waits a whole interval again.
    mutating func wrote(now: UInt64) {
        lastWrite = now
    }

    /// Records the goodbye. Returns false if one was already said (say only one).
    mutating func ending(now: UInt64) -> Bool {
        guard endedAt == nil else { return false }
        endedAt = now
        return true
    }

    mutating func tick(now: UInt64) -> Action {
        if let endedAt { return now &- endedAt >= lingerMilliseconds ? .abort : .none }
        guard now &- lastWrite >= heartbeatMilliseconds else { return .none }
        lastWrite = now
        return .heartbeat
    }
}
