import Glibc
import Logging
import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistWire

/// The running gateway: one loop, one listener, its sessions, and the drain on SIGTERM.
///
/// Create and `run` it on the thread that will be the loop thread; it returns when the gateway
/// has drained and every handle is closed.
public final class Gateway {
    public let config: GatewayConfig
    public let logger: Logger
    let loop: EventLoop
    let dateCache = DateCache()
    private(set) var router: Router!
    /// Store feeds and topics; loop thread only.
    private(set) var hub: PushHub!
    /// The `redis` engine, when this gateway is one node of a cluster; loop thread only.
    private(set) var cluster: ClusterEngine?
    /// The model stores; any thread.
    public let stores: StoreRegistry
    /// The job threads; any thread.
    public let jobs: JobRunner
    /// API keys and subscription tokens; any thread.
    let access: AccessControl
    /// What the gateway counts, and its `/metrics`; loop thread only.
    let counters = GatewayCounters()
    let metrics = GatewayMetrics()
    private var lagProbe: LoopTimer?

    private var listener: TCPListener?
    /// Every connection's current session, keyed by the connection (a session that upgrades to
    /// WebSocket or SSE replaces itself under the same key).
    private var sessions: [ObjectIdentifier: any GatewaySession] = [:]
    /// Sessions that count against `maxConnections` (refused ones do not).
    private var servingCount = 0
    /// Serving connections per client address, for `maxConnectionsPerAddress`.
    private var perAddress: [String: Int] = [:]
    private var refused: Set<ObjectIdentifier> = []
    private var signals: [SignalWatcher] = []
    private var sweepTimer: LoopTimer?
    private var drainTimer: LoopTimer?
    /// Streaming sessions still to be told to go, in the order they will be.
    private var drainQueue: [ObjectIdentifier] = []
    private var drainSpreadTimer: LoopTimer?
    private(set) var isDraining = false
    private var acceptErrorsLogged = 0

    /// Binds the listening socket. Loop thread (the calling thread becomes it).
    public init(config: GatewayConfig, logger: Logger) throws {
        var config = config
        config.host = Self.listenHost(config, logger: logger)
        self.config = config
        self.logger = logger
        access = AccessControl(apiKeys: config.apiKeys, tokenSecret: config.tokenSecret)
        loop = try EventLoop()
        let replication = Self.makeReplication(config, loop: loop)
        stores = StoreRegistry(historyLimit: config.historyLimit, replication: replication)
        jobs = JobRunner(threads: config.jobThreads)
        let files = StaticFiles(directory: config.publicDirectory)
        if files.isEmpty {
            logger.warning("no static files loaded", metadata: ["public": "\(config.publicDirectory)"])
        }
        hub = PushHub(stores: stores, loop: loop, historyLimit: config.historyLimit, counters: counters)
        router = Router(staticFiles: files, stores: stores, jobs: jobs, hub: hub, config: config, access: access, counters: counters,
            metrics: { [unowned self] in
                if let cluster = self.cluster { self.metrics.setEngineUp(cluster.isUp) }
                return self.metrics.render(self.metricsSample())
            }
        ) { [unowned self] in !self.isDraining }
        cluster = try Self.startCluster(config, replication: replication, gateway: self, hub: hub)
        let listener = try TCPListener(loop: loop, host: config.host, port: config.port)
        listener.onConnection = { [unowned self] connection in self.accepted(connection) }
        listener.onAcceptError = { [unowned self] error in self.acceptFailed(error) }
        self.listener = listener
        for number in [SIGINT, SIGTERM] {
            signals.append(try SignalWatcher(loop: loop, signal: number) { [unowned self] number in
                self.signalled(number)
            })
        }
        let interval = Self.sweepInterval(config)
        let sweep = LoopTimer(loop: loop) { [unowned self] in self.sweep() }
        sweep.start(delayMilliseconds: interval, repeatMilliseconds: interval)
        sweepTimer = sweep
        startLagProbe()
        if config.demo {
            if cluster != nil { startClusterDemo() } else { try startDemo() }
        }
    }

    /// The `tiles` store: 64 models `tile-0` … `tile-63`, recolored by an `animate` job.
    private func startDemo() throws {
        let tiles = try stores.create("tiles")
        let operations: [StoreOperation] = (0..<64).map { index in
            let color = AnimateJob.hexColor(UInt32(truncatingIfNeeded: (index &* 2_654_435_761) >> 8) & 0xFF_FFFF)
            return .put(model: "tile-\(index)", value: ["color": .string(color), "label": .string("Tile \(index)")])
        }
        try tiles.commit(operations)
        let job = jobs.startAnimate(store: tiles, rate: config.demoRate)
        logger.info("demo store ready", metadata: ["store": "tiles", "models": "64", "job": "\(job.id)", "rate": "\(config.demoRate)"])
    }

    /// The port actually bound (useful with port 0).
    public var port: Int { listener?.localPort ?? 0 }

    /// The URL clients use.
    public var url: String {
        let host = config.host.contains(":") ? "[\(config.host)]" : config.host
        return "http://\(host):\(port)"
    }

    /// The loop's mailbox: the door other threads use.
    public var mailbox: Mailbox { loop.mailbox }

    /// Serves until drained. Loop thread only.
    public func run() {
        loop.run()
        logger.info("stopped")
    }

    // MARK: Connections

    private func accepted(_ connection: TCPConnection) {
        let session = HTTPSession(connection: connection, gateway: self)
        let id = ObjectIdentifier(connection)
        sessions[id] = session
        let address = connection.peerAddress ?? "unknown"
        if servingCount >= config.maxConnections {
            refuse(session, id, .connectionLimit, .serviceUnavailable, "too many connections")
            return
        }
        let fromAddress = perAddress[address, default: 0]
        if fromAddress >= config.maxConnectionsPerAddress {
            refuse(session, id, .addressLimit, .tooManyRequests, "too many connections from this address")
            return
        }
        perAddress[address] = fromAddress + 1
        servingCount += 1
        session.start()
    }

    private func refuse(_ session: HTTPSession, _ id: ObjectIdentifier, _ reason: Refusal, _ status: HTTPStatus, _ detail: String) {
        refused.insert(id)
        counters.refused(reason)
        session.refuse(status, detail)
        logger.debug("connection refused", metadata: ["reason": "\(reason.rawValue)"])
    }

    private func acceptFailed(_ error: LoopError) {
        // libuv sheds the pending connection itself; logging every failure would flood the log.
        acceptErrorsLogged += 1
        if acceptErrorsLogged <= 10 || acceptErrorsLogged % 1000 == 0 {
            logger.error("accept failed", metadata: ["error": "\(error)", "count": "\(acceptErrorsLogged)"])
        }
    }

    /// A session hands its connection to another protocol's session.
    func replaceSession(of connection: TCPConnection, with session: any GatewaySession) {
        let id = ObjectIdentifier(connection)
        guard sessions[id] != nil else { return }
        sessions[id] = session
    }

    func sessionDidClose(_ connection: TCPConnection) {
        let id = ObjectIdentifier(connection)
        guard sessions.removeValue(forKey: id) != nil else { return }
        if refused.remove(id) == nil {
            servingCount -= 1
            let address = connection.peerAddress ?? "unknown"
            let remaining = perAddress[address, default: 1] - 1
            perAddress[address] = remaining > 0 ? remaining : nil
        }
        if isDraining && sessions.isEmpty {
            finish()
        }
    }

    private func sweep() {
        let now = loop.nowMilliseconds
        for session in Array(sessions.values) {
            session.sweep(now: now)
        }
    }

    private static func sweepInterval(_ config: GatewayConfig) -> UInt64 {
        let shortest = min(
            config.idleTimeoutSeconds, config.headTimeoutSeconds, config.lingerSeconds,
            config.pingIntervalSeconds, config.pingTimeoutSeconds, config.sseHeartbeatSeconds)
        return UInt64(max(10, min(1000, shortest * 1000 / 10)))
    }

    // MARK: Metrics

    private func metricsSample() -> GatewayMetrics.Sample {
        var connections: [SessionTransport: Int] = [:]
        for session in sessions.values {
            connections[session.transport, default: 0] += 1
        }
        return GatewayMetrics.Sample(
            counters: counters, bytesRead: loop.bytesRead, bytesWritten: loop.bytesWritten,
            connections: connections,
            storeSubscriptions: hub.feeds.values.reduce(0) { $0 + $1.subscriberCount },
            topicSubscriptions: hub.topics.values.reduce(0) { $0 + $1.subscriberCount },
            stores: stores.all.count, topics: hub.topics.count,
            mailboxDepth: loop.mailbox.statistics.depth,
            jobStates: jobs.allJobs.map { $0.info.state.name })
    }

    /// A timer due every 100 ms whose lateness, measured on the monotonic clock, is the loop's lag.
    private func startLagProbe() {
        let period = GatewayMetrics.lagProbeMilliseconds
        var due = Clock.monotonicSeconds() + Double(period) / 1000
        let probe = LoopTimer(loop: loop) { [unowned self] in
            let now = Clock.monotonicSeconds()
            self.metrics.loopLag.record(max(0, now - due))
            due = now + Double(period) / 1000
        }
        probe.start(delayMilliseconds: period, repeatMilliseconds: period)
        lagProbe = probe
    }

    // MARK: Drain

    private func signalled(_ number: Int32) {
        if isDraining {
            logger.warning("second signal: closing every connection now", metadata: ["signal": "\(number)"])
            for session in Array(sessions.values) { session.connection.close() }
            return
        }
        beginDrain(reason: number == SIGTERM ? "SIGTERM" : "SIGINT")
    }

    /// Stops accepting, lets requests in flight finish, then stops the loop.
    public func beginDrain(reason: String) {
        guard !isDraining else { return }
        isDraining = true
        logger.info("draining", metadata: ["reason": "\(reason)", "connections": "\(sessions.count)"])
        listener?.close()
        listener = nil
        for (id, session) in sessions {
            if session.transport.isStream {
                drainQueue.append(id)
            } else {
                session.drain()
            }
        }
        drainQueue.shuffle()
        spreadStreamDrain()
        let timer = LoopTimer(loop: loop) { [unowned self] in
            self.logger.warning("drain timeout: closing remaining connections", metadata: ["count": "\(self.sessions.count)"])
            for session in Array(self.sessions.values) { session.connection.close() }
        }
        timer.start(delayMilliseconds: UInt64(config.drainTimeoutSeconds * 1000))
        drainTimer = timer
        if sessions.isEmpty {
            finish()
        }
    }

    private func finish() {
        // Jobs stop at a change-set boundary; work already queued finishes first.
        jobs.shutDown()
        sweepTimer?.close()
        sweepTimer = nil
        lagProbe?.close()
        lagProbe = nil
        drainTimer?.close()
        drainTimer = nil
        drainSpreadTimer?.close()
        drainSpreadTimer = nil
        for watcher in signals { watcher.close() }
        signals.removeAll()
        cluster?.close()
        loop.mailbox.shutDown()
    }

    /// Tells streaming clients to go a few at a time over the first three quarters of the drain
    /// timeout, so that they do not all reconnect to the other nodes at once; the last quarter
    /// leaves time for close handshakes and the last writes.
    private func spreadStreamDrain() {
        guard !drainQueue.isEmpty else { return }
        let total = drainQueue.count
        let windowMilliseconds = max(1.0, config.drainTimeoutSeconds * 750)
        let start = loop.nowMilliseconds
        var told = 0
        let timer = LoopTimer(loop: loop) { [unowned self] in
            let elapsed = Double(self.loop.nowMilliseconds &- start)
            let due = min(total, Int((Double(total) * min(1, elapsed / windowMilliseconds)).rounded(.up)))
            while told < due {
                let id = self.drainQueue[told]
                told += 1
                self.sessions[id]?.drain()
            }
            if told == total {
                self.drainQueue.removeAll()
                self.drainSpreadTimer?.close()
                self.drainSpreadTimer = nil
            }
        }
        let tick = UInt64(max(5, min(100, windowMilliseconds / Double(total))))
        timer.start(delayMilliseconds: 0, repeatMilliseconds: tick)
        drainSpreadTimer = timer
    }

    /// A random delay of up to one second that a client told to go waits before it reconnects.
    static func reconnectJitterMilliseconds() -> UInt64 {
        UInt64.random(in: 0...1000)
    }

    // MARK: Listening

    /// Without an API key anyone who can reach the port may mutate state, so unless told
    /// `--insecure-open` the gateway keeps to loopback.
    private static func listenHost(_ config: GatewayConfig, logger: Logger) -> String {
        if !config.apiKeys.isEmpty {
            logger.info("API key required for mutating calls", metadata: ["keys": "\(config.apiKeys.count)"])
            return config.host
        }
        if config.insecureOpen || isLoopback(config.host) {
            logger.warning(
                "no API key configured: any client that reaches the port may publish and mutate",
                metadata: ["host": "\(config.host)", "insecure-open": "\(config.insecureOpen)"])
            return config.host
        }
        let loopback = config.host.contains(":") ? "::1" : "127.0.0.1"
        logger.warning(
            "no API key configured: listening on loopback only; set --api-key or --api-key-file, or --insecure-open",
            metadata: ["requested": "\(config.host)", "listening": "\(loopback)"])
        return loopback
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}
