/// Decides a WebSocket connection's keepalive and closing deadlines; `WebSocketSession` acts.
///
/// Time is injected (loop milliseconds) so every deadline is testable without waiting. The
/// timeouts are the same for every connection, so they live in `Timing`, held once by the
/// gateway and passed in: a connection keeps only its three instants.
struct WebSocketSessionState {
    enum Action: Equatable {
        case none
        /// Send a ping: the peer has been quiet for a ping interval.
        case ping
        /// Close the socket without a handshake: the peer missed its pong, or never answered our close.
        case abort
    }

    struct Timing {
        let pingIntervalMilliseconds: UInt64
        let pingTimeoutMilliseconds: UInt64
        let closeTimeoutMilliseconds: UInt64
    }

    /// Stands for "not yet" in `pingSentAt` and `closeSentAt` (no optional's padding): the loop's
    /// clock counts milliseconds from boot and never reaches it.
    private static let never = UInt64.max

    private var lastHeard: UInt64
    private var pingSentAt = never
    /// When our close frame was queued; nothing is sent after it.
    private var closeSentAt = never

    init(now: UInt64) {
        lastHeard = now
    }

    var closeSent: Bool { closeSentAt != Self.never }

    /// Any frame from the peer shows it is alive, a pong included.
    mutating func heard(now: UInt64) {
        lastHeard = now
        pingSentAt = Self.never
    }

    /// Records our close frame. Returns false if one was already sent (send only one).
    mutating func sendingClose(now: UInt64) -> Bool {
        guard closeSentAt == Self.never else { return false }
        closeSentAt = now
        return true
    }

    mutating func tick(now: UInt64, _ timing: Timing) -> Action {
        if closeSentAt != Self.never {
            return now &- closeSentAt >= timing.closeTimeoutMilliseconds ? .abort : .none
        }
        if pingSentAt != Self.never {
            return now &- pingSentAt >= timing.pingTimeoutMilliseconds ? .abort : .none
        }
        if now &- lastHeard >= timing.pingIntervalMilliseconds {
            pingSentAt = now
            return .ping
        }
        return .none
    }
}
