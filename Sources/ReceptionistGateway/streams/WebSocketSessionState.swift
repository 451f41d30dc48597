/// Decides a WebSocket connection's keepalive and closing deadlines; `WebSocketSession` acts.
///
/// Time is injected (loop milliseconds) so every deadline is testable without waiting. The
/// timeouts are the same for every connection, so they live in `Timing`, held once by the
/// gateway and passed in: a connection keeps only two instants.
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

    /// What the connection waits for from the peer, and since when (loop milliseconds): its
    /// pong, or, with `closeBit` set, the answer to our close, which no later frame cancels.
    /// `notWaiting` otherwise. One word for both waits: once our close is sent a ping no longer
    /// matters, so the two never need to be kept at once. The loop's clock counts milliseconds
    /// from boot and never reaches the top bit.
    private var waitingSince = notWaiting
    private var lastHeard: UInt64
    private static let notWaiting = UInt64.max
    private static let closeBit: UInt64 = 1 << 63

    init(now: UInt64) {
        lastHeard = now
    }

    /// Our close frame was queued; nothing is sent after it.
    var closeSent: Bool { waitingSince != Self.notWaiting && waitingSince & Self.closeBit != 0 }
    private var pingSent: Bool { waitingSince != Self.notWaiting && waitingSince & Self.closeBit == 0 }

    /// Any frame from the peer shows it is alive, a pong included.
    mutating func heard(now: UInt64) {
        lastHeard = now
        if pingSent { waitingSince = Self.notWaiting }
    }

    /// Records our close frame. Returns false if one was already sent (send only one).
    mutating func sendingClose(now: UInt64) -> Bool {
        guard !closeSent else { return false }
        waitingSince = now | Self.closeBit
        return true
    }

    mutating func tick(now: UInt64, _ timing: Timing) -> Action {
        if closeSent {
            return now &- (waitingSince & ~Self.closeBit) >= timing.closeTimeoutMilliseconds ? .abort : .none
        }
        if pingSent {
            return now &- waitingSince >= timing.pingTimeoutMilliseconds ? .abort : .none
        }
        if now &- lastHeard >= timing.pingIntervalMilliseconds {
            waitingSince = now
            return .ping
        }
        return .none
    }
}
