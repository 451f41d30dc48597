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

    @Option(help: "Log level: trace, debug, info, notice, warning, error or critical. Debug logs every request.")
    var logLevel = "info"

    func validate() throws {
        guard (1...65_535).contains(maxHeadBytes) else { throw ValidationError("--max-head-bytes must be 1...65535") }
        guard maxBodyBytes >= 0 else { throw ValidationError("--max-body-bytes must not be negative") }
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard idleTimeout > 0, headTimeout > 0, drainTimeout >= 0 else {
            throw ValidationError("timeouts must be positive")
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive") }
        guard maxQueuedBytes > 0 else { throw ValidationError("--max-queued-bytes must be positive") }
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

        let gateway = try Gateway(config: config, logger: logger)
        logger.info("started", metadata: ["url": "\(gateway.url)", "public": "\(`public`)"])
        print("Receptionist listening on \(gateway.url)")
        fflush(nil)  // every C stream, so a reader of the pipe sees the line now
        gateway.run()
    }
}
