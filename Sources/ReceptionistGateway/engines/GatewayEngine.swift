import Logging
import ReceptionistDisk
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush

/// Where the gateway's stores and topics live: in memory, on disk (`--data-dir`) or in Redis
/// (`--engine redis`). Everything that differs between them is chosen here, once, at start:
/// the store registry's journal or replication, the topics' `TopicLog`, the idempotency table,
/// how the demo starts, and what closes at the end. No other part asks which engine runs.
///
/// Loop thread only (made on it, before the gateway listens).
final class GatewayEngine {
    let stores: StoreRegistry
    let disk: DiskEngine?
    private let replication: RedisStoreReplication?
    /// What the data directory held at start: put back by `start`, then let go (it held every
    /// change set `--retain` kept, where a store's ring keeps only `--history-bytes` of them).
    private(set) var contents: DiskContents?
    /// Set by `start`.
    private(set) var cluster: ClusterEngine?

    /// What `start` makes for the rest of the gateway.
    struct Started {
        /// Where topics' messages are numbered and kept.
        let topicLog: any TopicLog
        /// The idempotency keys' table: in memory, kept on disk with `--data-dir`, or in Redis for
        /// a cluster.
        let idempotency: any IdempotencyStore
    }

    /// `opened` is the disk engine, opened before the loop (`DiskRestore.open`).
    init(config: GatewayConfig, opened: (DiskEngine, DiskContents)?, loop: EventLoop) {
        disk = opened?.0
        contents = opened?.1
        replication = ClusterEngine.replication(for: config, loop: loop)
        // A disk store keeps `--retain` change sets for reads of the past; the others `--history`.
        let namespaces = config.namespaces
        let retain = config.disk?.retain ?? 0
        stores = StoreRegistry(
            historyLimit: max(config.historyLimit, retain), replication: replication, journal: disk,
            historyOf: { name in
                max(namespaces.history(of: name, default: config.historyLimit), retain == 0 ? 0 : namespaces.retain(of: name, default: retain))
            }, historyBytes: config.historyBytes, maxStores: config.maxStores)
    }

    /// Puts back what the disk holds, starts the cluster, and makes the topics' log and the
    /// idempotency table.
    func start(_ config: GatewayConfig, hub: PushHub, loop: EventLoop, logger: Logger) throws -> Started {
        let contents = self.contents
        self.contents = nil
        if let contents { DiskRestore.restore(contents, stores: stores, hub: hub) }
        cluster = try ClusterEngine.start(config, replication: replication, loop: loop, stores: stores, hub: hub, logger: logger)
        if let cluster {
            return Started(
                topicLog: ClusterTopicLog(cluster: cluster),
                idempotency: RedisIdempotencyStore(
                    engine: cluster, windowSeconds: config.idempotencyWindowSeconds, maxKeys: config.maxIdempotencyKeys))
        }
        let table = LocalIdempotencyStore(windowSeconds: config.idempotencyWindowSeconds, maxKeys: config.maxIdempotencyKeys)
        guard let disk else { return Started(topicLog: MemoryTopicLog(hub: hub), idempotency: table) }
        return Started(
            topicLog: DiskTopicLog(hub: hub, engine: disk, loop: loop),
            idempotency: DiskIdempotencyStore(table: table, disk: disk, kept: contents?.idempotencyKeys ?? [], mailbox: loop.mailbox))
    }

    /// `--demo`: the `tiles` store, made (or, in a cluster, joined) and animated.
    func startDemo(_ config: GatewayConfig, jobs: JobRunner, logger: Logger) throws {
        if cluster != nil {
            DemoStore.startInCluster(stores: stores, jobs: jobs, rate: config.demoRate, logger: logger)
        } else {
            try DemoStore.start(stores: stores, jobs: jobs, rate: config.demoRate, logger: logger)
        }
    }

    /// Once every job has ended: the cluster's connections close; the disk writes what is
    /// queued, marks its directory clean and releases it, within `DiskEngine.closeTimeoutSeconds`.
    func close(logger: Logger) {
        cluster?.close()
        if let disk, !disk.close() {
            logger.error("the disk did not finish writing in time; stopping anyway, as after a crash",
                         metadata: ["seconds": "\(DiskEngine.closeTimeoutSeconds)"])
        }
    }
}
