import ArgumentParser
import Glibc
import Logging
import ReceptionistDisk
import ReceptionistGateway
import ReceptionistWire

/// `receptionist serve`: runs the gateway until SIGTERM or SIGINT, then drains and exits 0.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the gateway."
    )

    @Option(help: "A config file, YAML or JSON: any option by its long name, and namespaces (README, 'Configuration'). The command line and the environment win over it.")
    var config: String?

    @Option(help: "Address to listen on. Use 0.0.0.0 or :: to listen on every interface.")
    var host = "127.0.0.1"

    @Option(help: "TCP port to listen on; 0 picks a free one.")
    var port = 8080

    @Option(help: "Directory of static files (the viewer), read once at start-up.")
    var `public` = "Public"

    @Option(help: "Largest request head (request line and headers), in bytes.")
    var maxHeadBytes = 16 * 1024

    @Option(help: "Largest request body, in bytes.")
    var maxBodyBytes = 1024 * 1024

    @Option(help: "Seconds a keep-alive connection may sit idle before it is closed.")
    var idleTimeout = 60.0

    @Option(help: "Seconds allowed to receive a complete request head (cuts off slow trickles).")
    var headTimeout = 10.0

    @Option(help: "Most concurrent connections; more are answered 503 and closed.")
    var maxConnections = 10_000

    @Option(help: "Outbound bytes queued per connection before the gateway applies backpressure (at most 2 GiB).")
    var maxQueuedBytes = 1024 * 1024

    @Option(help: "Seconds a graceful shutdown may take before remaining connections are closed.")
    var drainTimeout = 10.0

    @Option(help: "Worker threads for store mutations and jobs (default: the number of cores).")
    var jobThreads = ServeCommand.cores

    @Option(help: "Store requests and commits waiting for a job thread; more are answered 503 over_capacity (WebSocket commits: unavailable).")
    var maxQueuedWork = 65_536

    @Option(help: "Change sets each store, and messages each topic, keeps so reconnecting subscribers can resume.")
    var history = 1000

    @Option(help: "The most bytes of messages each topic, and of change sets each store (its --retain ones included), keeps in memory; past it the oldest go, as past --history.")
    var historyBytes = 16 * 1024 * 1024

    @Option(help: "Seconds a topic nobody publishes to or follows is kept, with its history; then it is forgotten, and a subscriber coming back gets a reset. 0 keeps topics for good (one never published to goes with its last subscriber).")
    var topicTtl = 86_400.0

    @Option(help: "Most topics kept at once; a publish that would make one more is answered 503 over_capacity.")
    var maxTopics = 100_000

    @Option(help: "Most stores kept at once; a creation past it is answered 503 over_capacity.")
    var maxStores = 10_000

    @Flag(inversion: .prefixedNo, exclusivity: .chooseLast, help: "Create the 'tiles' demo store (64 models) and animate it.")
    var demo = false

    @Option(help: "Change sets per second for the demo's animate job.")
    var demoRate = 30.0

    @Option(help: "Largest WebSocket message a client may send, in bytes (all fragments together, at most 2 GiB); larger closes with 1009.")
    var maxMessageBytes = 65_536

    @Option(help: "Seconds a WebSocket peer may stay quiet before it is pinged (at most a day).")
    var pingInterval = 30.0

    @Option(help: "Seconds a pinged WebSocket peer has to answer before it is closed (at most a day).")
    var pingTimeout = 10.0

    @Option(help: "Seconds between heartbeat comments on an idle SSE stream.")
    var sseHeartbeat = 15.0

    @Option(help: "Most milliseconds a subscriber's frames wait to leave together while the gateway is busy writing (20,000 writes a second or more): as long as the last such flush took, 1 at least; 0 sends at once always.")
    var writeDelay: UInt64 = 10

    @Flag(help: "Do not offer permessage-deflate; every WebSocket frame goes uncompressed.")
    var noCompression = false

    @Option(help: "Server WebSocket frames shorter than this many bytes go uncompressed, even to clients that negotiated permessage-deflate.")
    var compressionMinBytes = 256

    @Option(help: "Seconds over which presence joins and leaves are collected into one frame per presence subscriber.")
    var presenceInterval = 1.0

    @Option(help: "Members past which presence subscribers get the counts only (clients and distinct users).")
    var presenceMaxMembers = 1000

    @Flag(inversion: .prefixedNo, exclusivity: .chooseLast, help: "Serve /ws/echo, which echoes every WebSocket message (for conformance suites such as Autobahn's).")
    var enableEcho = false

    @Option(help: "An API key that mutating calls must present as 'Authorization: Bearer <key>' (repeatable). Without any, the gateway listens on loopback only unless --insecure-open.")
    var apiKey: [String] = []

    @Option(help: "A file of API keys, one per line (blank lines and lines starting with # are skipped).")
    var apiKeyFile: String?

    @Flag(inversion: .prefixedNo, exclusivity: .chooseLast, help: "Listen on --host even without an API key, so anyone who reaches the port may publish.")
    var insecureOpen = false

    @Option(help: "Secret for HS256 subscription tokens (JWT); when set, every subscription needs a token.")
    var tokenSecret: String?

    @Option(help: "A file holding the token secret (its first line), instead of --token-secret.")
    var tokenSecretFile: String?

    @Option(help: "URL of the connect hook: admits WebSocket and SSE connections that bring no token (docs/HOOKS.md).")
    var hookConnect: String?

    @Option(help: "URL of the subscribe hook: allows, narrows to models and key paths, or refuses a subscription no grant covers.")
    var hookSubscribe: String?

    @Option(help: "URL of the publish hook: allows, rewrites or refuses what WebSocket clients without an API key publish.")
    var hookPublish: String?

    @Option(help: "URL of the write hook: allows or refuses a WebSocket client's commit that no grant covers.")
    var hookWrite: String?

    @Option(help: "URL of the RPC hook: answers a WebSocket client's {\"type\":\"rpc\"} messages.")
    var hookRpc: String?

    @Option(help: "URL of the refresh hook: extends, shortly before it ends, the grant a connect hook's answer gave with expiresAt.")
    var hookRefresh: String?

    @Option(help: "Seconds a hook call may take, waiting included; past it the client is answered 'unavailable'.")
    var hookTimeout = 2.0

    @Option(help: "Most hook calls under way at once; more wait in a queue of --hook-max-queued.")
    var hookMaxInflight = 256

    @Option(help: "Most hook calls waiting; past it a client is answered 'unavailable' at once.")
    var hookMaxQueued = 10_000

    @Option(help: "A request header passed to the connect hook besides Cookie and Authorization (repeatable).")
    var hookForwardHeader: [String] = []

    @Option(help: "An origin allowed to open WebSockets and call the API from a browser (repeatable; '*' for any). Default: same origin only.")
    var allowedOrigin: [String] = []

    @Option(help: "Most concurrent connections from one client address; more are answered 429 and closed.")
    var maxConnectionsPerAddress = 1024

    @Option(help: "Most subscriptions one WebSocket connection may hold.")
    var maxSubscriptions = 64

    @Option(help: "Publishes and store mutations per second per API key (per client address without keys); 0 for no limit.")
    var publishRate = 1000.0

    @Option(help: "Publishes a key may make in one burst above --publish-rate.")
    var publishBurst = 2000.0

    @Option(help: "Seconds an Idempotency-Key is remembered after its first use; a retry within it is answered from the first attempt.")
    var idempotencyWindow = 300.0

    @Option(help: "Most Idempotency-Keys remembered at once; past it the oldest are forgotten first.")
    var idempotencyKeys = 100_000

    @Option(help: "Protocol messages per second one WebSocket client may send; 0 for no limit.")
    var clientMessageRate = 50.0

    @Option(help: "Protocol messages a WebSocket client may send in one burst.")
    var clientMessageBurst = 100.0

    @Option(help: "Log format: text, or json for one JSON object per line.")
    var logFormat = "text"

    @Option(help: "Keep stores and topics in this directory (the disk engine, SQLite in WAL mode), so they survive a restart. Without it they live in memory (or in Redis with --engine redis).")
    var dataDir: String?

    @Option(help: "When a write to --data-dir is acknowledged: 'always' once it is on disk (writes waiting together share one sync), or 'interval' once written, synced every --fsync-interval.")
    var fsync = "always"

    @Option(help: "Seconds between syncs with --fsync interval.")
    var fsyncInterval = 1.0

    @Option(help: "Change sets each store keeps in --data-dir for reads of the past and resumes (older ones are compacted away).")
    var retain = 100_000

    @Option(help: "Where topics and stores live: 'memory' (this process alone) or 'redis' (shared by every node on --redis-url).")
    var engine = "memory"

    @Option(help: """
        The redis engine's server: redis://[:password@]host[:port][/db] (default redis://127.0.0.1:6379/0). \
        Repeat it (or separate URLs with commas) to spread topics and stores over several servers; \
        every node must list them in the same order.
        """)
    var redisUrl: [String] = []

    /// The servers given, commas split, or the default one.
    var redisURLs: [String] {
        let urls = redisUrl.flatMap { $0.split(separator: ",").map { String($0.filter { $0 != " " }) } }
        return urls.isEmpty ? ["redis://127.0.0.1:6379/0"] : urls
    }

    @Option(help: "Commands the redis engine may have waiting for Redis's replies; past it publishes and commits answer 503.")
    var redisMaxPending = 10_000

    @Option(help: "Seconds a publish or commit waits for Redis before it is answered 503 (0.1 to 300).")
    var redisTimeout = 10.0

    @Option(help: "Seconds after its last heartbeat that a node is taken for dead and its members leave presence (0.3 to 300); it beats three times as often.")
    var heartbeatTimeout = 3.0

    @Option(help: "Messages or change sets each topic or store keeps in Redis, for resuming on any node (at least --history).")
    var redisHistory = 10_000

    @Option(help: "The most seconds an entry stays in Redis's history; 0 for no age limit.")
    var redisHistoryTtl = 0.0

    @Option(help: "Seconds a topic's keys stay in Redis after its last publish or the last node following it; then the topic starts over in a new epoch. 0 keeps them for good.")
    var redisTopicTtl = 2_592_000.0

    @Option(help: "Log level: trace, debug, info, notice, warning, error or critical. Debug logs every request.")
    var logLevel = "info"

    static var cores: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    func run() throws {
        // A peer that vanishes mid-write must cost an error code, not the process.
        signal(SIGPIPE, SIG_IGN)
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let json = logFormat == "json"
        LoggingSystem.bootstrap { label in
            if json {
                return JSONLogHandler(label: label, logLevel: level)
            }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "receptionist")
        do {
            try serve(logger: logger)
        } catch where json {
            // A log read as JSON gets why the start failed as JSON too, not as a line of text.
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }
    }

    /// Builds the configuration from the options, starts the gateway and runs it until it stops.
    private func serve(logger: Logger) throws {
        var config = GatewayConfig()
        config.host = Self.listenAddress(host) ?? host
        config.port = port
        config.publicDirectory = `public`
        config.parserLimits = HTTPParserLimits(maxHeadBytes: maxHeadBytes, maxBodyBytes: maxBodyBytes)
        config.idleTimeoutSeconds = idleTimeout
        config.headTimeoutSeconds = headTimeout
        config.maxConnections = maxConnections
        config.maxQueuedBytes = maxQueuedBytes
        config.drainTimeoutSeconds = drainTimeout
        config.jobThreads = jobThreads
        config.maxQueuedWork = maxQueuedWork
        config.historyLimit = history
        config.topicTTLSeconds = topicTtl
        config.maxTopics = maxTopics
        config.maxStores = maxStores
        config.historyBytes = historyBytes
        config.demo = demo
        config.demoRate = demoRate
        config.maxMessageBytes = maxMessageBytes
        config.pingIntervalSeconds = pingInterval
        config.pingTimeoutSeconds = pingTimeout
        config.sseHeartbeatSeconds = sseHeartbeat
        config.writeDelayMilliseconds = writeDelay
        config.enableEcho = enableEcho
        config.compression = !noCompression
        config.compressionMinBytes = compressionMinBytes
        config.presenceIntervalSeconds = presenceInterval
        config.presenceMaxMembers = presenceMaxMembers
        let fileKeys = try apiKeyFile.map(Self.keys(inFile:))
        // An API key file with no key in it would leave the gateway open: refused, not served.
        if let apiKeyFile, fileKeys?.isEmpty == true { throw ValidationError("the API key file \(apiKeyFile) holds no key") }
        config.apiKeys = apiKey + (fileKeys ?? [])
        config.insecureOpen = insecureOpen
        config.tokenSecret = try tokenSecret ?? tokenSecretFile.map { try Self.keys(inFile: $0).first ?? "" }
        if config.tokenSecret?.isEmpty == true { throw ValidationError("the token secret is empty") }
        config.allowedOrigins = allowedOrigin.map(Self.normalizedOrigin)
        config.maxConnectionsPerAddress = maxConnectionsPerAddress
        config.maxSubscriptionsPerConnection = maxSubscriptions
        config.publishRate = RateLimit(perSecond: publishRate, burst: publishBurst)
        config.clientMessageRate = RateLimit(perSecond: clientMessageRate, burst: clientMessageBurst)
        config.idempotencyWindowSeconds = idempotencyWindow
        config.maxIdempotencyKeys = idempotencyKeys
        config.redisURLs = engine == "redis" ? redisURLs : []
        config.disk = try dataDir.map { directory in
            try Self.makeDirectory(directory)
            var options = DiskOptions(
                directory: directory, fsync: DiskOptions.Fsync(rawValue: fsync) ?? .always, intervalSeconds: fsyncInterval,
                retain: retain, topicHistory: history)
            options.idempotencyWindowSeconds = idempotencyWindow
            options.maxIdempotencyKeys = idempotencyKeys
            return options
        }
        config.hooks.urls = [
            .connect: hookConnect, .subscribe: hookSubscribe, .publish: hookPublish, .write: hookWrite, .rpc: hookRpc,
            .refresh: hookRefresh,
        ].compactMapValues { $0 }
        if let file = self.config {
            try ConfigFile.applyNamespaces(of: file, to: &config, options: EnvironmentArguments.options(of: self))
        }
        config.hooks.timeoutSeconds = hookTimeout
        config.hooks.maxInFlight = hookMaxInflight
        config.hooks.maxQueued = hookMaxQueued
        config.hooks.forwardHeaders = hookForwardHeader
        config.redisMaxPendingCommands = redisMaxPending
        config.redisTimeoutSeconds = redisTimeout
        config.heartbeatTimeoutSeconds = heartbeatTimeout
        config.redisHistory = redisHistory
        config.redisHistoryTTLSeconds = redisHistoryTtl
        config.redisTopicTTLSeconds = redisTopicTtl

        warnOfDoubtfulSettings(config, logger: logger)
        let gateway = try Gateway(config: config, logger: logger)
        logger.info("started", metadata: ["url": "\(gateway.url)", "public": "\(`public`)"])
        print("Receptionist listening on \(gateway.url)")
        fflush(nil)  // every C stream, so a reader of the pipe sees the line now
        gateway.run()
    }
}
