import ArgumentParser
import Glibc
import Logging
import ReceptionistGateway
import ReceptionistWire

/// `receptionist serve`: runs the gateway until SIGTERM or SIGINT, then drains and exits 0.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the gateway."
    )

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

    @Option(help: "Outbound bytes queued per connection before the gateway applies backpressure.")
    var maxQueuedBytes = 1024 * 1024

    @Option(help: "Seconds a graceful shutdown may take before remaining connections are closed.")
    var drainTimeout = 10.0

    @Option(help: "Worker threads for store mutations and jobs (default: the number of cores).")
    var jobThreads = ServeCommand.cores

    @Option(help: "Change sets each store keeps so reconnecting subscribers can resume.")
    var history = 1000

    @Flag(help: "Create the 'tiles' demo store (64 models) and animate it.")
    var demo = false

    @Option(help: "Change sets per second for the demo's animate job.")
    var demoRate = 30.0

    @Option(help: "Largest WebSocket message a client may send, in bytes (all fragments together); larger closes with 1009.")
    var maxMessageBytes = 65_536

    @Option(help: "Seconds a WebSocket peer may stay quiet before it is pinged.")
    var pingInterval = 30.0

    @Option(help: "Seconds a pinged WebSocket peer has to answer before it is closed.")
    var pingTimeout = 10.0

    @Option(help: "Seconds between heartbeat comments on an idle SSE stream.")
    var sseHeartbeat = 15.0

    @Flag(help: "Serve /ws/echo, which echoes every WebSocket message (for conformance suites such as Autobahn's).")
    var enableEcho = false

    @Option(help: "Where topics and stores live: 'memory' (this process alone) or 'redis' (shared by every node on --redis-url).")
    var engine = "memory"

    @Option(help: "The redis engine's server: redis://[:password@]host[:port][/db].")
    var redisUrl = "redis://127.0.0.1:6379/0"

    @Option(help: "Log level: trace, debug, info, notice, warning, error or critical. Debug logs every request.")
    var logLevel = "info"

    static var cores: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    func validate() throws {
        guard (1...65_535).contains(maxHeadBytes) else { throw ValidationError("--max-head-bytes must be 1...65535") }
        guard maxBodyBytes >= 0 else { throw ValidationError("--max-body-bytes must not be negative") }
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard idleTimeout > 0, headTimeout > 0, drainTimeout >= 0 else {
            throw ValidationError("timeouts must be positive")
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive") }
        guard maxQueuedBytes > 0 else { throw ValidationError("--max-queued-bytes must be positive") }
        guard (1...256).contains(jobThreads) else { throw ValidationError("--job-threads must be 1...256") }
        guard history >= 0 else { throw ValidationError("--history must not be negative") }
        guard demoRate > 0 else { throw ValidationError("--demo-rate must be positive") }
        guard maxMessageBytes > 0 else { throw ValidationError("--max-message-bytes must be positive") }
        guard pingInterval > 0, pingTimeout > 0 else { throw ValidationError("--ping-interval and --ping-timeout must be positive") }
        guard sseHeartbeat > 0 else { throw ValidationError("--sse-heartbeat must be positive") }
        guard engine == "memory" || engine == "redis" else { throw ValidationError("--engine must be memory or redis") }
        guard engine != "redis" || GatewayConfig.isValidRedisURL(redisUrl) else {
            throw ValidationError("--redis-url must look like redis://host:port/db")
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
    }

    func run() throws {
        // A peer that vanishes mid-write must cost an error code, not the process.
        signal(SIGPIPE, SIG_IGN)
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "receptionist")

        var config = GatewayConfig()
        config.host = host
        config.port = port
        config.publicDirectory = `public`
        config.parserLimits = HTTPParserLimits(maxHeadBytes: maxHeadBytes, maxBodyBytes: maxBodyBytes)
        config.idleTimeoutSeconds = idleTimeout
        config.headTimeoutSeconds = headTimeout
        config.maxConnections = maxConnections
        config.maxQueuedBytes = maxQueuedBytes
        config.drainTimeoutSeconds = drainTimeout
        config.jobThreads = jobThreads
        config.historyLimit = history
        config.demo = demo
        config.demoRate = demoRate
        config.maxMessageBytes = maxMessageBytes
        config.pingIntervalSeconds = pingInterval
        config.pingTimeoutSeconds = pingTimeout
        config.sseHeartbeatSeconds = sseHeartbeat
        config.enableEcho = enableEcho
        config.redisURL = engine == "redis" ? redisUrl : nil

        let gateway = try Gateway(config: config, logger: logger)
        logger.info("started", metadata: ["url": "\(gateway.url)", "public": "\(`public`)"])
        print("Receptionist listening on \(gateway.url)")
        fflush(nil)  // every C stream, so a reader of the pipe sees the line now
        gateway.run()
    }
}
