import Glibc
import ReceptionistLoop
import ReceptionistModel

extension GatewayConfig {
    /// Whether `url` is a `redis://` URL the `redis` engine accepts.
    public static func isValidRedisURL(_ url: String) -> Bool {
        RedisEndpoint(url: url) != nil
    }
}

extension Gateway {
    /// The stores' commit path: through Redis with the `redis` engine, local otherwise.
    static func makeReplication(_ config: GatewayConfig, loop: EventLoop) -> RedisStoreReplication? {
        config.redisURL == nil ? nil : RedisStoreReplication(mailbox: loop.mailbox)
    }

    /// Starts the `redis` engine on the loop, sharing the hub's topics and the registry's stores.
    static func startCluster(
        _ config: GatewayConfig, replication: RedisStoreReplication?, gateway: Gateway, hub: PushHub
    ) throws -> ClusterEngine? {
        guard let url = config.redisURL, let replication else { return nil }
        guard let endpoint = RedisEndpoint(url: url) else { throw ClusterConfigError(url: url) }
        let engine = ClusterEngine(
            loop: gateway.loop, endpoint: endpoint, stores: gateway.stores, hub: hub, historyLimit: config.historyLimit,
            logger: gateway.logger)
        hub.cluster = engine
        replication.attach(engine)
        engine.start()
        gateway.logger.info("redis engine", metadata: ["redis": "\(endpoint)"])
        return engine
    }

    /// `--demo` with the `redis` engine: on a job thread, once Redis answers, the first node
    /// creates and fills `tiles`; every node then animates it.
    func startClusterDemo() {
        let stores = self.stores, jobs = self.jobs, rate = config.demoRate, logger = self.logger
        _ = jobs.submit {
            for _ in 0..<300 {
                do {
                    let tiles = try Self.createOrJoin("tiles", stores)
                    if tiles.version == 0 {
                        try tiles.commit((0..<64).map { index in
                            let color = AnimateJob.hexColor(UInt32(truncatingIfNeeded: (index &* 2_654_435_761) >> 8) & 0xFF_FFFF)
                            return .put(model: "tile-\(index)", value: ["color": .string(color), "label": .string("Tile \(index)")])
                        })
                    }
                    let job = jobs.startAnimate(store: tiles, rate: rate)
                    logger.info("demo store ready", metadata: ["store": "tiles", "job": "\(job.id)", "rate": "\(rate)"])
                    return
                } catch {
                    usleep(100_000)
                }
            }
            logger.error("demo store not created: Redis did not answer")
        }
    }
}

extension Gateway {
    static func createOrJoin(_ name: String, _ stores: StoreRegistry) throws(StoreError) -> ModelStore {
        do throws(StoreError) {
            return try stores.create(name)
        } catch .storeExists {
            return stores.replica(name)
        }
    }
}

struct ClusterConfigError: Error, CustomStringConvertible {
    let url: String
    var description: String { "'\(url)' is not a redis:// URL" }
}
