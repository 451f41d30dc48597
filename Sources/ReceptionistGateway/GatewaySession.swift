import ReceptionistLoop

/// What the gateway asks of every connection's session, whatever protocol it speaks now.
///
/// Loop thread only.
protocol GatewaySession: AnyObject {
    var connection: TCPConnection { get }
    /// The gateway is draining: finish what is in flight, say goodbye, close.
    func drain()
    /// The protocol the connection speaks now; streams are told to go in a spread when draining.
    var transport: SessionTransport { get }
    /// Periodic check of timeouts and keepalives, with the loop's time in milliseconds. Called
    /// only while the connection is open; `ConnectionTable` closes one that lingers too long.
    func sweep(now: UInt64)
}

/// Where sessions report that a connection changed hands or closed: the connection table.
///
/// Loop thread only.
protocol SessionTable: AnyObject {
    /// A session hands its connection to another protocol's session.
    func replaceSession(of connection: TCPConnection, with session: any GatewaySession)
    /// The connection's close callback ran: forget it.
    func sessionDidClose(_ connection: TCPConnection)
}

/// What a connection speaks: plain HTTP, or a long-lived WebSocket or SSE stream.
enum SessionTransport: String, CaseIterable {
    case http
    case webSocket = "websocket"
    case sse

    var isStream: Bool { self != .http }
}
