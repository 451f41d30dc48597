import ReceptionistModel

/// The data directory's notes on its last run: whether it ended cleanly, how it synced, on
/// which boot of the machine, and which run it was (`life`, also kept in the directory's lock
/// file: a data file put back from a copy carries an older one).
struct DiskMeta {
    var clean: Bool?
    var fsync: String?
    var boot: String?
    var life: String?

    static func read(_ db: SQLiteDatabase) throws(SQLiteError) -> DiskMeta {
        let statement = try db.prepare("SELECT key, value FROM meta")
        var meta = DiskMeta()
        while try statement.step() {
            switch statement.text(0) {
            case "clean": meta.clean = statement.text(1) == "1"
            case "fsync": meta.fsync = statement.text(1)
            case "boot": meta.boot = statement.text(1)
            case "life": meta.life = statement.text(1)
            default: break
            }
        }
        return meta
    }

    /// Writes the notes (and, after a lost tail, the stores' and topics' new epochs), synced.
    static func write(
        _ db: SQLiteDatabase, clean: Bool, fsync: String, boot: String, life: String? = nil, epochsFrom contents: DiskContents? = nil
    ) throws(SQLiteError) {
        try db.execute("BEGIN IMMEDIATE")
        do throws(SQLiteError) {
            let set = try db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)")
            var notes = [("clean", clean ? "1" : "0"), ("fsync", fsync), ("boot", boot)]
            if let life { notes.append(("life", life)) }
            for (key, value) in notes {
                set.bind(1, key)
                set.bind(2, value)
                try set.run()
            }
            if let contents, contents.newEpochs {
                let store = try db.prepare("UPDATE stores SET epoch = ?2 WHERE name = ?1")
                for entry in contents.stores {
                    store.bind(1, entry.name)
                    store.bind(2, entry.epoch)
                    try store.run()
                }
                let topic = try db.prepare("UPDATE topics SET epoch = ?2 WHERE name = ?1")
                for entry in contents.topics {
                    topic.bind(1, entry.name)
                    topic.bind(2, entry.epoch)
                    try topic.run()
                }
            }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
        // Synced whatever the mode: an unclean mark that is lost would pass a lost tail as clean.
        try db.checkpoint()
    }

    /// Every store and topic in a new epoch: after a lost tail, a version or number given out
    /// before may be given out again for something else.
    static func renewEpochs(_ contents: DiskContents) -> DiskContents {
        var renewed = contents
        renewed.stores = contents.stores.map {
            .init(
                name: $0.name, epoch: ModelStore.newEpoch(), version: $0.version, modelsVersion: $0.modelsVersion,
                models: $0.models, history: [], deleted: $0.deleted)
        }
        renewed.topics = contents.topics.map { .init(name: $0.name, epoch: ModelStore.newEpoch(), seq: $0.seq, messages: []) }
        return renewed
    }
}
