/// A publisher connection, as `PublisherPool` sees it.
protocol PoolConnection: AnyObject {
    /// Whether messages may be sent on it now (open, and past its handshake if it has one).
    var canSend: Bool { get }
    /// Messages sent on it and not yet answered.
    var outstanding: Int { get }
    func close()
}

/// A publisher's connections, taken round-robin, each with at most `window` messages unanswered.
///
/// Loop thread only.
struct PublisherPool<Connection: PoolConnection> {
    let window: Int
    private(set) var connections: [Connection] = []
    private var next = 0

    init(window: Int) {
        self.window = max(1, window)
    }

    mutating func add(_ connection: Connection) {
        connections.append(connection)
    }

    /// The next connection, round-robin, that may send and has room in its window.
    mutating func available() -> Connection? {
        for _ in 0..<connections.count {
            let connection = connections[next % connections.count]
            next += 1
            if connection.canSend && connection.outstanding < window { return connection }
        }
        return nil
    }

    /// Answers owed on the connections that may still give them.
    var outstanding: Int { connections.reduce(0) { $0 + ($1.canSend ? $1.outstanding : 0) } }

    mutating func closeAll() {
        for connection in connections { connection.close() }
        connections = []
    }
}
