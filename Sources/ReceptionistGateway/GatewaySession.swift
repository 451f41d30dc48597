import ReceptionistLoop

/// What the gateway asks of every connection's session, whatever protocol it speaks now.
///
/// Loop thread only.
protocol GatewaySession: AnyObject {
    var connection: TCPConnection { get }
    /// The gateway is draining: finish what is in flight, say goodbye, close.
    func drain()
    /// Periodic check of timeouts and keepalives, with the loop's time in milliseconds.
    func sweep(now: UInt64)
}
