import Glibc
import Logging
import ReceptionistModel

/// `--demo`: the `tiles` store, 64 models `tile-0` … `tile-63` with a color and a label,
/// recolored by an `animate` job.
enum DemoStore {
    static let name = "tiles"

    /// The 64 tiles, each with its own starting color.
    static func tileOperations() -> [StoreOperation] {
        (0..<64).map { index in
            let color = AnimateJob.hexColor(UInt32(truncatingIfNeeded: (index &* 2_654_435_761) >> 8) & 0xFF_FFFF)
            return .put(model: "tile-\(index)", value: ["color": .string(color), "label": .string("Tile \(index)")])
        }
    }

    /// The `memory` and `disk` engines: creates, fills and animates the store now (one kept on
    /// disk from an earlier run goes on where it was).
    static func start(stores: StoreRegistry, jobs: JobRunner, rate: Double, logger: Logger) throws {
        let tiles = try stores.store(name) ?? stores.create(name)
        if tiles.version == 0 { try tiles.commit(tileOperations()) }
        let job = jobs.startAnimate(store: tiles, rate: rate)
        logger.info("demo store ready", metadata: ["store": "\(name)", "models": "64", "job": "\(job?.id ?? "none")", "rate": "\(rate)"])
    }

    /// The `redis` engine: on a job thread, once Redis answers, the first node creates and fills
    /// the store; every node then animates it.
    static func startInCluster(stores: StoreRegistry, jobs: JobRunner, rate: Double, logger: Logger) {
        _ = jobs.submit {
            for _ in 0..<300 {
                do {
                    let tiles = try createOrJoin(stores)
                    if tiles.version == 0 { try tiles.commit(tileOperations()) }
                    let job = jobs.startAnimate(store: tiles, rate: rate)
                    logger.info("demo store ready", metadata: ["store": "\(name)", "job": "\(job?.id ?? "none")", "rate": "\(rate)"])
                    return
                } catch {
                    usleep(100_000)
                }
            }
            logger.error("demo store not created: Redis did not answer")
        }
    }

    private static func createOrJoin(_ stores: StoreRegistry) throws(StoreError) -> ModelStore {
        do throws(StoreError) {
            return try stores.create(name)
        } catch .storeExists {
            return stores.replica(name)
        }
    }
}
