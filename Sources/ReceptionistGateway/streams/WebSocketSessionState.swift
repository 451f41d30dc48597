/// Decides a WebSocket connection's keepalive and closing deadlines; `WebSocketSession` acts.
///
/// Time is injected (loop milliseconds) so every deadline is testable without waiting.
struct WebSocketSessionState {
    enum Action: Equatable {
        case none
        /// Send a ping: the peer has been quiet for a ping interval.
        case ping
        /// Close the socket without a handshake: the peer missed its pong, or never answered our close.
        case abort
    }

    let pingIntervalMilliseconds: UInt64
    let pingTimeoutMilliseconds: UInt64
    let closeTimeoutMilliseconds: UInt64

    private var lastHeard: UInt64
    private var pingSentAt: UInt64?
    /// When our close frame was queued; nothing is sent after it.
    private(set) var closeSentAt: UInt64?

    init(now: UInt64, pingIntervalMilliseconds: UInt64, pingTimeoutMilliseconds: UInt64, closeTimeoutMilliseconds: UInt64) {
        self.pingIntervalMilliseconds = pingIntervalMilliseconds
        self.pingTimeoutMilliseconds = pingTimeoutMilliseconds
        self.closeTimeoutMilliseconds = closeTimeoutMilliseconds
        lastHeard = now
    }

    var closeSent: Bool { closeSentAt != nil }

    /// Any frame from the peer shows it is alive, a pong included.
    mutating func heard(now: UInt64) {
        lastHeard = now
        pingSentAt = nil
    }

    /// Records our close frame. Returns false if one was already sent (send only one).
    mutating func sendingClose(now: UInt64) -> Bool {
        guard closeSentAt == nil else { return false }
        closeSentAt = now
        return true
    }

    mutating func tick(now: UInt64) -> Action {
        if let closeSentAt {
            return now &- closeSentAt >= closeTimeoutMilliseconds ? .abort : .none
        }
        if let pingSentAt {
            return now &- pingSentAt >= pingTimeoutMilliseconds ? .abort : .none
        }
        if now &- lastHeard >= pingIntervalMilliseconds {
            pingSentAt = now
            return .ping
        }
        return .none
    }
}
