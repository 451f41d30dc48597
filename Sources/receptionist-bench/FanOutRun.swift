import ReceptionistLoop
import ReceptionistWire

/// Many `FanOutClient`s on one loop: opens them a bounded number at a time, spread round-robin over
/// the source addresses, and keeps the counts and the latency histogram they report.
///
/// Loop thread only.
final class FanOutRun {
    let loop: EventLoop
    let host: String
    let port: Int
    let path: String
    let sourceHosts: [String]
    let target: Int
    /// The message that subscribes, or nil where the URL itself subscribes.
    let subscribeMessage: String?
    /// The subprotocol offered in the handshake, if any.
    let subprotocol: String?
    let maxMessageBytes = 64 * 1024
    /// Connections between connect and subscribed at any time: enough to keep the server's accept
    /// queue busy, few enough to stay inside its listen backlog.
    let maxOpening: Int

    /// Called once every connection has subscribed or failed.
    var onSettled: (() -> Void)?

    private(set) var started = 0
    private(set) var connected = 0
    private(set) var subscribed = 0
    private(set) var failed = 0
    /// Subscribed connections that were lost afterwards.
    private(set) var dropped = 0
    private(set) var delivered = 0
    private(set) var histogram = LatencyHistogram()
    private(set) var firstDelivery: Int64 = 0
    private(set) var lastDelivery: Int64 = 0
    private(set) var firstError: String?
    private var opening = 0
    private var clients: [FanOutClient] = []
    private var stopped = false
    private var isOpening = false

    init(loop: EventLoop, host: String, port: Int, path: String, sourceHosts: [String], connections: Int,
         subscribeTo target: StreamTarget, dialect: Dialect, maxOpening: Int = 256) {
        self.loop = loop
        self.host = host
        self.port = port
        self.path = path
        self.sourceHosts = sourceHosts
        self.target = connections
        self.maxOpening = maxOpening
        switch dialect {
        case .receptionist:
            switch target {
            case .topic(let name): subscribeMessage = #"{"type":"subscribe","topic":""# + name + #""}"#
            case .store(let name): subscribeMessage = #"{"type":"subscribe","store":""# + name + #""}"#
            }
            subprotocol = "receptionist.v1"
        case .raw:
            subscribeMessage = nil
            subprotocol = nil
        }
        clients.reserveCapacity(connections)
    }

    var isSettled: Bool { subscribed + failed >= target }

    func start() {
        openMore()
        checkSettled()
    }

    /// Closes every connection; the loop can then run out of handles.
    func stop() {
        stopped = true
        for client in clients { client.close() }
        clients = []
    }

    private func openMore() {
        // A connect that fails at once reports back into here; the outer loop carries on instead,
        // so that a run of immediate failures cannot nest one call per connection.
        guard !isOpening else { return }
        isOpening = true
        defer { isOpening = false }
        while !stopped && started < target && opening < maxOpening {
            let source = sourceHosts.isEmpty ? nil : sourceHosts[started % sourceHosts.count]
            started += 1
            opening += 1
            TCPConnector.connect(loop: loop, host: host, port: port, sourceHost: source) { [unowned self] result in
                switch result {
                case .success(let connection):
                    guard !stopped else {
                        connection.close()
                        return
                    }
                    clients.append(FanOutClient(connection: connection, run: self))
                case .failure(let error):
                    clientDidFail("\(error)", wasSubscribed: false)
                }
            }
        }
    }

    private func checkSettled() {
        guard isSettled, let onSettled else { return }
        self.onSettled = nil
        onSettled()
    }

    // MARK: Reports from clients

    func clientDidConnect() {
        connected += 1
    }

    func clientDidSubscribe() {
        subscribed += 1
        opening -= 1
        openMore()
        checkSettled()
    }

    func clientDidFail(_ reason: String, wasSubscribed: Bool) {
        if firstError == nil { firstError = reason }
        if wasSubscribed {
            dropped += 1
            return
        }
        failed += 1
        opening -= 1
        openMore()
        checkSettled()
    }

    func record(latency: Int64, at now: Int64) {
        if delivered == 0 { firstDelivery = now }
        lastDelivery = now
        delivered += 1
        histogram.record(latency)
    }
}
