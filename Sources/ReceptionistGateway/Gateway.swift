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

    private var listener: TCPListener?
    /// Every connection's current session, keyed by the connection (a session that upgrades to
    /// WebSocket or SSE replaces itself under the same key).
    private var sessions: [ObjectIdentifier: any GatewaySession] = [:]
    /// Sessions that count against `maxConnections` (refused ones do not).
    private var servingCount = 0
    private var refused: Set<ObjectIdentifier> = []
    private var signals: [SignalWatcher] = []
    private var sweepTimer: LoopTimer?
    private var drainTimer: LoopTimer?
    private(set) var isDraining = false
    private var acceptErrorsLogged = 0

    /// Binds the listening socket. Loop thread (the calling thread becomes it).
    public init(config: GatewayConfig, logger: Logger) throws {
        self.config = config
        self.logger = logger
        loop = try EventLoop()
        let replication = Self.makeReplication(config, loop: loop)
        stores = StoreRegistry(historyLimit: config.historyLimit, replication: replication)
        jobs = JobRunner(threads: config.jobThreads)
        let files = StaticFiles(directory: config.publicDirectory)
        if files.isEmpty {
            logger.warning("no static files loaded", metadata: ["public": "\(config.publicDirectory)"])
        }
        hub = PushHub(stores: stores, loop: loop, historyLimit: config.historyLimit)
        router = Router(staticFiles: files, stores: stores, jobs: jobs, hub: hub, enableEcho: config.enableEcho) { [unowned self] in
            !self.isDraining
        }
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
        if servingCount >= config.maxConnections {
            refused.insert(id)
            session.refuseOverCapacity()
            logger.debug("connection refused: at capacity", metadata: ["max": "\(config.maxConnections)"])
            return
        }
        servingCount += 1
        session.start()
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
        for session in Array(sessions.values) {
            session.drain()
        }
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
        drainTimer?.close()
        drainTimer = nil
        for watcher in signals { watcher.close() }
        signals.removeAll()
        cluster?.close()
        loop.mailbox.shutDown()
    }
}
