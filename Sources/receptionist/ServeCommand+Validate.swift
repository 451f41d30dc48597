import ArgumentParser
import Glibc
import Logging
import ReceptionistDisk
import ReceptionistGateway
import ReceptionistWire

/// The checks `receptionist serve` makes of its options before it starts.
extension ServeCommand {
    func validate() throws {
        // Below a few hundred bytes no browser's request fits, /healthz's hardly.
        guard (256...65_535).contains(maxHeadBytes) else { throw ValidationError("--max-head-bytes must be 256...65535") }
        guard maxBodyBytes >= 0 else { throw ValidationError("--max-body-bytes must not be negative") }
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        // Bounded above too: a time or rate past these (`inf`, `1e300`) would pass a test of sign
        // and then overflow where it becomes milliseconds or a count.
        let bounded: [(String, Double, ClosedRange<Double>, unit: String)] = [
            ("--idle-timeout", idleTimeout, 0.001...86_400, " seconds"), ("--head-timeout", headTimeout, 0.001...86_400, " seconds"),
            ("--drain-timeout", drainTimeout, 0...3_600, " seconds"), ("--sse-heartbeat", sseHeartbeat, 0.001...86_400, " seconds"),
            ("--idempotency-window", idempotencyWindow, 0.001...31_536_000, " seconds"),
            ("--demo-rate", demoRate, 0.001...100_000, ""), ("--publish-rate", publishRate, 0...1e9, ""),
            ("--publish-burst", publishBurst, 1...1e9, ""), ("--client-message-rate", clientMessageRate, 0...1e9, ""),
            ("--client-message-burst", clientMessageBurst, 1...1e9, ""),
        ]
        for (name, value, range, unit) in bounded where !range.contains(value) {
            throw ValidationError("\(name) must be \(range.lowerBound) to \(range.upperBound)\(unit)")
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive") }
        // A connection keeps both in half words (`TCPConnection`, `WebSocketDecoder`): 2 GiB each.
        guard maxQueuedBytes > 0 else { throw ValidationError("--max-queued-bytes must be positive") }
        guard maxQueuedBytes <= Int(Int32.max) else { throw ValidationError("--max-queued-bytes must be at most 2147483647") }
        guard (1...256).contains(jobThreads) else { throw ValidationError("--job-threads must be 1...256") }
        guard maxQueuedWork > 0 else { throw ValidationError("--max-queued-work must be positive") }
        guard history >= 0 else { throw ValidationError("--history must not be negative") }
        guard maxMessageBytes > 0 else { throw ValidationError("--max-message-bytes must be positive") }
        guard maxMessageBytes <= Int(Int32.max) else { throw ValidationError("--max-message-bytes must be at most 2147483647") }
        guard pingInterval > 0, pingTimeout > 0 else { throw ValidationError("--ping-interval and --ping-timeout must be positive") }
        // A connection keeps its instants in half words (`WebSocketSessionState`), which measure up to 6 days.
        guard pingInterval <= 86_400, pingTimeout <= 86_400 else {
            throw ValidationError("--ping-interval and --ping-timeout are at most 86400 seconds (a day)")
        }
        guard writeDelay <= 100 else { throw ValidationError("--write-delay is at most 100 milliseconds") }
        guard compressionMinBytes >= 0 else { throw ValidationError("--compression-min-bytes must not be negative") }
        guard (0.01...3600).contains(presenceInterval) else { throw ValidationError("--presence-interval must be 0.01...3600 seconds") }
        guard presenceMaxMembers >= 0 else { throw ValidationError("--presence-max-members must not be negative") }
        guard maxConnectionsPerAddress > 0, maxSubscriptions > 0 else {
            throw ValidationError("--max-connections-per-address and --max-subscriptions must be positive")
        }
        guard tokenSecret == nil || tokenSecretFile == nil else {
            throw ValidationError("give --token-secret or --token-secret-file, not both")
        }
        for url in [hookConnect, hookSubscribe, hookPublish, hookWrite, hookRpc, hookRefresh].compactMap({ $0 })
        where !(url.hasPrefix("http://") || url.hasPrefix("https://")) {
            throw ValidationError("a hook URL must start with http:// or https://, not '\(Self.withoutCredentials(url))'")
        }
        for name in hookForwardHeader where !HTTPHeaders.isValidName(name) {
            throw ValidationError("--hook-forward-header must name a header (letters, digits and !#$%&'*+-.^_`|~), not '\(name)'")
        }
        // Without a token or a connect hook no stream has an identity: the hook would decide nothing.
        guard hookSubscribe == nil || tokenSecret != nil || tokenSecretFile != nil || hookConnect != nil else {
            throw ValidationError("--hook-subscribe needs --token-secret or --hook-connect: without them streams are open to all")
        }
        guard (0.01...60).contains(hookTimeout) else { throw ValidationError("--hook-timeout must be 0.01 to 60 seconds") }
        guard hookMaxInflight > 0, hookMaxQueued >= 0 else {
            throw ValidationError("--hook-max-inflight must be positive and --hook-max-queued not negative")
        }
        guard redisMaxPending > 0 else { throw ValidationError("--redis-max-pending must be positive") }
        guard (0.1...300).contains(redisTimeout) else { throw ValidationError("--redis-timeout must be 0.1 to 300 seconds") }
        guard (0.3...300).contains(heartbeatTimeout) else { throw ValidationError("--heartbeat-timeout must be 0.3 to 300 seconds") }
        guard topicTtl >= 0, topicTtl <= 31_536_000 else { throw ValidationError("--topic-ttl must be 0 to 31536000 seconds") }
        guard historyBytes >= 1024 else { throw ValidationError("--history-bytes must be at least 1024") }
        guard maxTopics >= 1 else { throw ValidationError("--max-topics must be positive") }
        guard maxStores >= 1 else { throw ValidationError("--max-stores must be positive") }
        guard redisHistory >= 1 else { throw ValidationError("--redis-history must be positive") }
        // Redis must hold at least what a node's own history does, or a node that joins later
        // would start with less than the others.
        guard engine != "redis" || redisHistory >= history else {
            throw ValidationError("--redis-history (\(redisHistory)) must be at least --history (\(history))")
        }
        for (name, ttl) in [("--redis-history-ttl", redisHistoryTtl), ("--redis-topic-ttl", redisTopicTtl)] where !(0...31_536_000).contains(ttl) {
            throw ValidationError("\(name) must be 0 to 31536000 seconds")
        }
        guard idempotencyKeys > 0 else { throw ValidationError("--idempotency-keys must be positive") }
        guard ["text", "json"].contains(logFormat) else { throw ValidationError("--log-format must be text or json") }
        guard engine == "memory" || engine == "redis" else { throw ValidationError("--engine must be memory or redis") }
        if engine == "redis" {
            for url in redisURLs where !GatewayConfig.isValidRedisURL(url) {
                throw ValidationError("--redis-url must look like redis://host:port/db, not '\(Self.withoutCredentials(url))'")
            }
            guard Set(redisURLs).count == redisURLs.count else { throw ValidationError("--redis-url names a server twice") }
        }
        if dataDir != nil {
            guard engine == "memory" else { throw ValidationError("--data-dir keeps a single node's state; the redis engine keeps it in Redis") }
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        try validateServing()
    }

    /// What the checks above leave: values checked whether or not the option they go with is
    /// given (a setting that takes effect later must not be wrong now), and where the gateway
    /// listens and writes.
    private func validateServing() throws {
        guard DiskOptions.Fsync(rawValue: fsync) != nil else { throw ValidationError("--fsync must be always or interval") }
        guard (0.001...3600).contains(fsyncInterval) else { throw ValidationError("--fsync-interval must be 0.001 to 3600 seconds") }
        guard retain >= 1 else { throw ValidationError("--retain must be positive") }
        guard dataDir?.isEmpty != true else { throw ValidationError("--data-dir is empty: name a directory") }
        guard Self.listenAddress(host) != nil else {
            throw ValidationError("--host must be an IPv4 or IPv6 address (or localhost), not '\(host)'")
        }
        guard !apiKey.contains(where: \.isEmpty) else { throw ValidationError("--api-key is empty") }
        for origin in allowedOrigin where !Self.isOrigin(origin) {
            throw ValidationError("--allowed-origin must be scheme://host[:port], as a browser sends it, not '\(origin)'")
        }
    }

    /// The address `host` names: an IP address as written, and `localhost` as 127.0.0.1.
    static func listenAddress(_ host: String) -> String? {
        if host == "localhost" { return "127.0.0.1" }
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1 ? host : nil
    }

    /// `origin` as a browser sends it: scheme and host in lower case, a scheme's default port left
    /// out (`https://app.example:443` is sent `https://app.example`, and never matched as written).
    static func normalizedOrigin(_ origin: String) -> String {
        let lower = origin.lowercased()
        for (scheme, port) in [("https://", ":443"), ("http://", ":80")] where lower.hasPrefix(scheme) && lower.hasSuffix(port) {
            return String(lower.dropLast(port.count))
        }
        return lower
    }

    /// Whether `origin` is an Origin header's value: a scheme, `://`, a host, an optional port,
    /// and nothing after (a browser sends no path, and leaves a scheme's default port out).
    static func isOrigin(_ origin: String) -> Bool {
        guard let schemeEnd = origin.range(of: "://"), !origin[..<schemeEnd.lowerBound].isEmpty,
              origin[..<schemeEnd.lowerBound].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) })
        else { return origin == "*" || origin == "null" }
        let authority = origin[schemeEnd.upperBound...]
        return !authority.isEmpty && !authority.contains("/") && !authority.contains("@") && HTTPHost.isValid(String(authority))
    }

    /// A URL as an error may show it: whatever comes before its last `@` (user and password, or
    /// part of them in a URL too garbled to parse) is left out.
    static func withoutCredentials(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        let scheme = url.range(of: "://").map { url[..<$0.upperBound] } ?? ""
        return scheme + "…@" + url[url.index(after: at)...]
    }
}
