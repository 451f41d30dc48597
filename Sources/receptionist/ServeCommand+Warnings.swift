import Logging
import ReceptionistGateway

/// What `receptionist serve` warns of at start: options it takes but that cannot be what the
/// operator meant. None stops the start; each is one line in the log.
extension ServeCommand {
    func warnOfDoubtfulSettings(_ config: GatewayConfig, logger: Logger) {
        // A misspelt variable is ignored in silence otherwise (`RECEPTIONIST_HISTROY=5`).
        let known = Set(EnvironmentArguments.options(of: self).map(\.variable))
        // Kubernetes names a Service's address `<SERVICE>_SERVICE_*` and `<SERVICE>_PORT_*`.
        let serviceLinks = ["RECEPTIONIST_SERVICE_", "RECEPTIONIST_PORT_"]
        for name in EnvironmentArguments.current().keys.sorted()
        where name.hasPrefix("RECEPTIONIST_") && !known.contains(name) && !serviceLinks.contains(where: name.hasPrefix) {
            logger.warning("an environment variable names no option, and is ignored", metadata: ["variable": "\(name)"])
        }
        if engine != "redis", !redisUrl.isEmpty {
            logger.warning("--redis-url is ignored without --engine redis: stores and topics stay in this process")
        }
        // The deployment examples' placeholders, and HMAC keys short enough to guess offline
        // from one token (RFC 7518 §3.2 asks at least the hash's 32 bytes for HS256).
        let secrets = config.apiKeys.map { ("an API key", $0) } + (config.tokenSecret.map { [("the token secret", $0)] } ?? [])
        for (what, secret) in secrets where secret.lowercased().hasPrefix("replace-me") {
            logger.warning("\(what) is still the deployment example's placeholder: anyone who read the example holds it")
        }
        if let secret = config.tokenSecret, secret.utf8.count < 32 {
            logger.warning(
                "the token secret is shorter than 32 bytes: tokens signed with it can be forged by guessing it",
                metadata: ["bytes": "\(secret.utf8.count)"])
        }
    }
}
