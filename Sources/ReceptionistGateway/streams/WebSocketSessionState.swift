/// Decides a WebSocket connection's keepalive and closing deadlines; `WebSocketSession` acts.
///
/// Time is injected (loop milliseconds) so every deadline is testable without waiting. The
/// timeouts are the same for every connection, so they live in `Timing`, held once by the
/// gateway and passed in: a connection keeps only two instants, in half a word each.
///
/// Invariant: an instant is kept cut to its low bits and compared by wrapping subtraction, which
/// is right for any span shorter than the bits can count (`lastHeard` 49 days, `waiting` 12
/// days). `Timing` holds every span to `Timing.longestMilliseconds` (6 days), and the
/// connection table's sweep runs `tick` at least once a second, so a span is always measured
/// before it wraps.
struct WebSocketSessionState {
    enum Action: Equatable {
        case none
        /// Send a ping: the peer has been quiet for a ping interval.
        case ping
        /// Close the socket without a handshake: the peer missed its pong, or never answered our close.
        case abort
    }

    struct Timing {
        /// The longest span a connection's half-word instants can measure without doubt.
        static let longestMilliseconds: UInt64 = 1 << 29

        let pingIntervalMilliseconds: UInt64
        let pingTimeoutMilliseconds: UInt64
        let closeTimeoutMilliseconds: UInt64

        /// Each span past `longestMilliseconds` is taken as that (the options allow at most a day).
        init(pingIntervalMilliseconds: UInt64, pingTimeoutMilliseconds: UInt64, closeTimeoutMilliseconds: UInt64) {
            self.pingIntervalMilliseconds = min(pingIntervalMilliseconds, Self.longestMilliseconds)
            self.pingTimeoutMilliseconds = min(pingTimeoutMilliseconds, Self.longestMilliseconds)
            self.closeTimeoutMilliseconds = min(closeTimeoutMilliseconds, Self.longestMilliseconds)
        }
    }

    /// What the connection waits for from the peer, and since when: its pong, or the answer to
    /// our close, which no later frame cancels. The kind in the top two bits (`pongKind`,
    /// `closeKind`, or none), the instant in the low 30. One half word for both waits: once our
    /// close is sent a ping no longer matters, so the two never need to be kept at once.
    private var waiting: UInt32 = 0
    private var lastHeard: UInt32
    private static let kindMask: UInt32 = 0b11 << 30
    private static let pongKind: UInt32 = 0b01 << 30
    private static let closeKind: UInt32 = 0b10 << 30

    init(now: UInt64) {
        lastHeard = UInt32(truncatingIfNeeded: now)
    }

    /// Our close frame was queued; nothing is sent after it.
    var closeSent: Bool { waiting & Self.kindMask == Self.closeKind }
    private var pingSent: Bool { waiting & Self.kindMask == Self.pongKind }

    /// Any frame from the peer shows it is alive, a pong included.
    mutating func heard(now: UInt64) {
        lastHeard = UInt32(truncatingIfNeeded: now)
        if pingSent { waiting = 0 }
    }

    /// Records our close frame. Returns false if one was already sent (send only one).
    mutating func sendingClose(now: UInt64) -> Bool {
        guard !closeSent else { return false }
        waiting = Self.closeKind | UInt32(truncatingIfNeeded: now) & ~Self.kindMask
        return true
    }

    mutating func tick(now: UInt64, _ timing: Timing) -> Action {
        let cut = UInt32(truncatingIfNeeded: now)
        // Milliseconds since the wait began, in the 30 bits it keeps.
        let waited = UInt64((cut &- waiting) & ~Self.kindMask)
        if closeSent {
            return waited >= timing.closeTimeoutMilliseconds ? .abort : .none
        }
        if pingSent {
            return waited >= timing.pingTimeoutMilliseconds ? .abort : .none
        }
        if UInt64(cut &- lastHeard) >= timing.pingIntervalMilliseconds {
            waiting = Self.pongKind | cut & ~Self.kindMask
            return .ping
        }
        return .none
    }
}
