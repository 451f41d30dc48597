import Logging
import ReceptionistDisk
import ReceptionistModel
import ReceptionistPush

/// Opens the `disk` engine (`--data-dir`) at start and puts back what it holds: every store in
/// the registry and every topic in the hub, with their versions, numbers, epochs and histories,
/// before the gateway listens.
enum DiskRestore {
    /// The engine for `config`, or nil without `--data-dir` (everything then stays in memory, and
    /// the log says so once).
    static func open(_ config: GatewayConfig, logger: Logger) throws -> (DiskEngine, DiskContents)? {
        guard var options = config.disk else {
            if config.redisURLs.isEmpty {
                logger.notice("no --data-dir: stores and topics are kept in memory only and are lost when the gateway stops")
            }
            return nil
        }
        options.reportFailing = { [logger] reason in
            if let reason {
                logger.error("writes to the data directory fail: answered 507 until they are stored again", metadata: ["reason": "\(reason)"])
            } else {
                logger.notice("writes to the data directory are stored again")
            }
        }
        let (engine, contents) = try DiskEngine.open(options)
        logger.info("data directory open", metadata: [
            "dir": "\(options.directory)", "fsync": "\(options.fsync.rawValue)", "stores": "\(contents.stores.count)",
            "topics": "\(contents.topics.count)",
        ])
        if contents.replacedDataFile {
            logger.warning(
                "the data file is not the one this directory last ran on (put back from a copy?): every store and topic starts a new epoch")
        } else if contents.newEpochs {
            logger.warning("the last run stopped without syncing and the machine restarted since: every store and topic starts a new epoch")
        }
        return (engine, contents)
    }

    /// Puts `contents` back into `stores` and `hub`.
    static func restore(_ contents: DiskContents, stores: StoreRegistry, hub: PushHub) {
        for store in contents.stores {
            stores.restore(store.name, epoch: store.epoch, version: store.version, models: store.models, history: store.history)
        }
        for topic in contents.topics {
            hub.topic(topic.name).restore(
                epoch: topic.epoch, seq: topic.seq,
                entries: topic.messages.map { TopicEntry(seq: $0.seq, publishedAt: $0.publishedAt, data: $0.data) })
        }
    }
}
