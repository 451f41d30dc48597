import ReceptionistLoop

/// What the gateway asks of every connection's session, whatever protocol it speaks now.
///
/// Loop thread only.
protocol GatewaySession: AnyObject {
    var connection: TCPConnection { get }
    /// The gateway is draining: finish what is in flight, say goodbye, close.
    func drain()
    /// Whether this is a long-lived stream (WebSocket or SSE), told to go in a spread when draining.
    var isStream: Bool { get }
    /// Periodic check of timeouts and keepalives, with the loop's time in milliseconds.
    func sweep(now: UInt64)
}
