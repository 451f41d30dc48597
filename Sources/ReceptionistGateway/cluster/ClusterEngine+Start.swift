import Logging
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush

extension GatewayConfig {
    /// Whether `url` is a `redis://` URL the `redis` engine accepts.
    public static func isValidRedisURL(_ url: String) -> Bool {
        RedisEndpoint(url: url) != nil
    }
}

extension ClusterEngine {
    /// The stores' commit path: through Redis with the `redis` engine, local otherwise.
    static func replication(for config: GatewayConfig, loop: EventLoop) -> RedisStoreReplication? {
        config.redisURLs.isEmpty ? nil : RedisStoreReplication(mailbox: loop.mailbox)
    }

    /// Starts the `redis` engine on the loop, sharing the hub's topics and the registry's stores;
    /// nil with the `memory` engine.
    static func start(
        _ config: GatewayConfig, replication: RedisStoreReplication?, loop: EventLoop, stores: StoreRegistry, hub: PushHub,
        logger: Logger
    ) throws -> ClusterEngine? {
        guard !config.redisURLs.isEmpty, let replication else { return nil }
        var endpoints: [RedisEndpoint] = []
        for url in config.redisURLs {
            guard let endpoint = RedisEndpoint(url: url) else { throw ClusterConfigError(url: url) }
            endpoints.append(endpoint)
        }
        let engine = ClusterEngine(
            loop: loop, endpoints: endpoints, stores: stores, hub: hub, historyLimit: config.historyLimit,
            redisHistory: RedisHistory(
                maxEntries: config.redisHistory, maxAgeSeconds: config.redisHistoryTTLSeconds,
                topicKeysSeconds: config.redisTopicTTLSeconds),
            maxPendingCommands: config.redisMaxPendingCommands,
            timeoutSeconds: config.redisTimeoutSeconds, heartbeatTimeoutSeconds: config.heartbeatTimeoutSeconds, logger: logger)
        hub.topicSource = engine
        hub.presenceRelay.source = engine
        hub.storeSource = engine
        replication.attach(engine)
        engine.start()
        logger.info("redis engine", metadata: ["redis": "\(endpoints.map(\.description).joined(separator: ", "))"])
        return engine
    }
}

struct ClusterConfigError: Error, CustomStringConvertible {
    let url: String
    var description: String { "'\(url)' is not a redis:// URL" }
}
