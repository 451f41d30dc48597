import Logging

/// Where the gateway may listen. Without an API key anyone who can reach the port may mutate
/// state, so unless told `--insecure-open` the gateway keeps to loopback, and says so.
enum ListenPolicy {
    /// The host to bind for `config`, logging the decision.
    static func host(for config: GatewayConfig, logger: Logger) -> String {
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
