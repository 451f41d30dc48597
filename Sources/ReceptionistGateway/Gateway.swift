import Logging
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush

/// The running gateway: the wiring of one loop, its listener, sessions, push hub, stores, jobs,
/// operations and, with the `redis` engine, the cluster. Each part is created here and handed
/// what it needs; no part reaches back into the gateway.
///
/// Create and `run` it on the thread that will be the loop thread; it returns when the gateway
/// has drained and every handle is closed.
public final class Gateway {
    public let config: GatewayConfig
    public let logger: Logger
    private let loop: EventLoop
    /// The model stores; any thread.
    public let stores: StoreRegistry
    /// The job threads; any thread.
    public let jobs: JobRunner
    private let hub: PushHub
    /// Where stores and topics live: memory, disk or Redis.
    private let engine: GatewayEngine
    private let table: ConnectionTable
    private let drain: Drain
    private let lagProbe: LagProbe
    private var listener: TCPListener?
    private var sweepTimer: LoopTimer?
    /// Forgets the topics quiet for `--topic-ttl`.
    private var topicSweepTimer: LoopTimer?
    /// The backend's hooks, when any is set.
    private let hooks: HookClient?
    var acceptErrorsLogged = 0
    var shedLogged = 0

    /// Binds the listening socket. Loop thread (the calling thread becomes it).
    public init(config: GatewayConfig, logger: Logger) throws {
        var config = config
        config.host = ListenPolicy.host(for: config, logger: logger)
        Self.raiseDescriptorLimit(for: config, logger: logger)
        self.config = config
        self.logger = logger
        // Before the loop: a directory that cannot be used stops the start with nothing to close.
        let opened = try DiskRestore.open(config, logger: logger)
        let loop = try EventLoop()
        loop.writeDelay = WriteDelay(maxDelayMilliseconds: config.writeDelayMilliseconds)
        self.loop = loop
        engine = GatewayEngine(config: config, opened: opened, loop: loop)
        stores = engine.stores
        jobs = JobRunner(threads: config.jobThreads, maxQueuedWork: config.maxQueuedWork)
        hub = PushHub(
            stores: stores, context: LoopExecutionContext(loop: loop), historyLimit: config.historyLimit, counters: PushCounters(),
            presence: PresenceSettings(intervalSeconds: config.presenceIntervalSeconds, maxMembers: config.presenceMaxMembers),
            historyBytes: config.historyBytes)
        if !config.namespaces.list.isEmpty {
            let namespaces = config.namespaces, limit = config.historyLimit
            hub.historyOf = { namespaces.history(of: $0, default: limit) }
        }
        let started = try engine.start(config, hub: hub, loop: loop, logger: logger)

        let counters = GatewayCounters()
        let metrics = GatewayMetrics()
        table = ConnectionTable(config: config, counters: counters, logger: logger)
        drain = try Drain(loop: loop, table: table, timeoutSeconds: config.drainTimeoutSeconds, logger: logger)
        lagProbe = LagProbe(loop: loop, metrics: metrics)
        let operations = OperationsEndpoints(
            loop: loop, drain: drain, table: table, hub: hub, stores: stores, jobs: jobs, counters: counters, metrics: metrics,
            engine: engine.cluster, disk: engine.disk)
        hooks = config.hooks.urls.isEmpty ? nil : HookClient(settings: config.hooks, loop: loop, logger: logger)
        if let hooks { metrics.watch(hooks) }
        let access = AccessControl(
            apiKeys: config.apiKeys, tokenSecret: config.tokenSecret, connectHook: config.hooks.url(.connect) != nil)
        let publisher = TopicPublisher(hub: hub, log: started.topicLog, rate: config.publishRate)
        let boundHub = LoopBound(hub, loop: loop)
        let mailbox = loop.mailbox
        let router = Router(
            staticFiles: Self.staticFiles(config, logger), stores: stores, jobs: jobs, hub: hub,
            publisher: publisher, idempotency: Idempotency(store: started.idempotency), config: config, access: access, counters: counters,
            operations: operations, storeDeleted: { name, store in _ = mailbox.post { boundHub.value.storeDeleted(name, store: store) } },
            storeLog: engine.cluster.map { LoopBound($0 as any StoreSource, loop: loop) }, hooks: hooks)
        let streams = StreamServices(
            config: config, hub: hub, publisher: publisher, access: access, counters: counters, logger: logger, table: table,
            hooks: hooks, stores: stores, handoff: JobHandoff(jobs: jobs, mailbox: loop.mailbox))
        loop.context = streams
        // A topic's messages of one turn of the loop go to each subscriber together, in the
        // flush that ends the turn (invariant 47).
        let topicFanOut = IterationTask(loop: loop) { [unowned hub] in hub.fanOutDeferredTopics() }
        hub.deferTopicFanOut { topicFanOut.schedule() }
        let services = HTTPServices(
            config: config, router: router, jobs: jobs, mailbox: loop.mailbox, dateCache: DateCache(), streams: streams)

        let listener = try TCPListener(loop: loop, host: config.host, port: config.port)
        listener.onConnection = { [unowned table] connection in
            table.accept(HTTPSession(connection: connection, services: services))
        }
        listener.onAcceptError = { [unowned self] error in self.acceptFailed(error) }
        listener.shedReply = Self.shedReply
        listener.onShed = { [unowned self, unowned counters] shed in self.shed(shed, counters: counters) }
        self.listener = listener
        drain.onBegin = { [unowned self] in
            self.listener?.close()
            self.listener = nil
        }
        drain.onFinished = { [unowned self] in self.finish() }
        let interval = ConnectionTable.sweepInterval(config)
        let sweep = LoopTimer(loop: loop) { [unowned table, unowned loop] in table.sweep(now: loop.nowMilliseconds) }
        sweep.start(delayMilliseconds: interval, repeatMilliseconds: interval)
        sweepTimer = sweep
        hub.maxTopics = config.maxTopics
        topicSweepTimer = Self.topicSweep(config, hub: hub, log: started.topicLog, loop: loop)
        if config.demo { try engine.startDemo(config, jobs: jobs, logger: logger) }
    }

    /// Every quarter of `--topic-ttl` (within 50 ms and a minute), forgets the topics quiet for
    /// it; nil with a TTL of 0.
    private static func topicSweep(_ config: GatewayConfig, hub: PushHub, log: any TopicLog, loop: EventLoop) -> LoopTimer? {
        guard config.topicTTLSeconds > 0 else { return nil }
        let idle = UInt64(config.topicTTLSeconds * 1_000_000)
        let interval = UInt64(min(max(config.topicTTLSeconds / 4, 0.05), 60) * 1000)
        let timer = LoopTimer(loop: loop) { [unowned hub] in
            hub.forgetIdleTopics(now: Clock.microsecondsSinceEpoch(), idle: idle, release: log.release)
        }
        timer.start(delayMilliseconds: interval, repeatMilliseconds: interval)
        return timer
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

    /// Stops accepting, lets requests in flight finish, then stops the loop. Loop thread only.
    public func beginDrain(reason: String) {
        drain.begin(reason: reason)
    }

    /// Every connection has closed: stop the jobs at a change-set boundary (work already queued
    /// finishes first), then every handle, so the loop runs out and `run()` returns.
    ///
    /// The loop keeps running until the job threads have ended: a committing job may be waiting
    /// on it (its receptionist's backpressure, a cluster commit), so joining them here could
    /// deadlock. Their end is posted back, and only then do the cluster and the mailbox close.
    private func finish() {
        sweepTimer?.close()
        sweepTimer = nil
        topicSweepTimer?.close()
        topicSweepTimer = nil
        hooks?.close()
        lagProbe.close()
        let mailbox = loop.mailbox
        let engine = LoopBound((self.engine, hub), loop: loop)
        let logger = self.logger
        jobs.shutDown {
            _ = mailbox.post {
                // Every job has ended, so nothing commits any more; nothing observes the stores
                // either, so the disk's last notifications wait for nobody.
                let (engine, hub) = engine.value
                hub.closeFeeds()
                engine.close(logger: logger)
                mailbox.shutDown()
            }
        }
    }
}
