import Glibc
import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync

/// The data directory's database: its tables, the checks that refuse a file that is not ours or
/// is damaged, and the load at start.
enum DiskSchema {
    /// "RCPT": a database of another application is refused, never served.
    static let applicationID: Int64 = 0x5243_5054
    /// 3: stores keep their models as a snapshot at `models_version` and the change sets after
    /// it. A format-2 file (models always at the store's version) is brought forward at open.
    static let version: Int64 = 3
    static let fileName = "receptionist.sqlite3"

    static let tables = """
        CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS stores(name TEXT PRIMARY KEY, epoch TEXT NOT NULL, version INTEGER NOT NULL,
            models_version INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS models(store TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, value BLOB NOT NULL,
            PRIMARY KEY(store, id)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS change_sets(store TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
            entries BLOB NOT NULL, PRIMARY KEY(store, first)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS topics(name TEXT PRIMARY KEY, epoch TEXT NOT NULL, seq INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS messages(topic TEXT NOT NULL, seq INTEGER NOT NULL, published_at INTEGER NOT NULL,
            data BLOB NOT NULL, PRIMARY KEY(topic, seq)) WITHOUT ROWID;
        """ + DiskIdempotencyTable.schema

    /// Opens (or creates) the database in `directory`, checks it is ours and whole, and sets the
    /// journal mode and sync level for `fsync`. `heldData`: the directory held a database before.
    static func open(_ directory: String, fsync: DiskOptions.Fsync, heldData: Bool) throws(DiskError) -> SQLiteDatabase {
        let path = directory + "/" + fileName
        try refuseEmptied(path, heldData: heldData)
        do {
            let db = try SQLiteDatabase(path: path)
            // Reading the header fails on a file that is not a database at all.
            let application = try db.integer("PRAGMA application_id") ?? 0
            let schema = try db.integer("PRAGMA user_version") ?? 0
            let tableCount = try db.integer("SELECT count(*) FROM sqlite_schema") ?? 0
            if application == 0 && schema == 0 && tableCount == 0 {
                try db.execute("PRAGMA application_id = \(applicationID); PRAGMA user_version = \(version);")
            } else if application != applicationID {
                throw DiskError("\(path) is not a Receptionist data file (application id \(application)); refusing to use it")
            } else if schema == 2 {
                // Format 2 wrote every store's models at its version.
                try db.execute("""
                    BEGIN IMMEDIATE;
                    ALTER TABLE stores ADD COLUMN models_version INTEGER NOT NULL DEFAULT 0;
                    UPDATE stores SET models_version = version;
                    PRAGMA user_version = \(version);
                    COMMIT;
                    """)
            } else if schema != version {
                throw DiskError("\(path) has data format \(schema); this gateway reads format \(version)")
            }
            _ = try db.text("PRAGMA journal_mode = WAL")
            // 64 MiB of pages kept by the connection (SQLite's default is 2 MiB): the writer read
            // back the pages of its own recent inserts from the kernel once they left it.
            try db.execute("PRAGMA cache_size = -65536; PRAGMA mmap_size = 1073741824")
            // FULL syncs the log at every commit; NORMAL only at checkpoints, which the writer runs
            // at its interval (and never by itself: the automatic checkpoint is off then).
            try db.execute(fsync == .always ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0")
            try db.execute(tables)
            return db
        } catch let error as DiskError {
            throw error
        } catch let error as SQLiteError {
            if error.isCorrupt { throw DiskError("\(path) is damaged or not a database (\(error)); refusing to use it") }
            throw DiskError("cannot open \(path): \(error)")
        } catch {
            throw DiskError("cannot open \(path): \(error)")
        }
    }

    /// SQLite takes a missing or empty file for a new database, and throws away a log beside it:
    /// where the directory held a database, or a log holds data, that would lose every store and
    /// topic in silence. Refused instead, with what to do.
    private static func refuseEmptied(_ path: String, heldData: Bool) throws(DiskError) {
        let size = fileSize(path), logSize = fileSize(path + "-wal")
        guard size ?? 0 == 0, heldData || logSize ?? 0 > 0 else { return }
        let state = size == nil ? "missing" : "empty"
        throw DiskError("""
            \(path) is \(state), but the data directory held a database\(logSize ?? 0 > 0 ? " (its write-ahead log is still there)" : ""); \
            refusing to start on an empty one: restore the file, or move the directory away to start afresh
            """)
    }

    private static func fileSize(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    /// Every store and topic as stored, with at most `retain` change sets per store and
    /// `topicHistory` messages per topic. A row that does not decode is damage: refused.
    static func load(
        _ db: SQLiteDatabase, path: String, retain: (String) -> Int, topicHistory: Int
    ) throws(DiskError) -> DiskContents {
        do {
            var contents = DiskContents()
            let stores = try db.prepare("SELECT name, epoch, version, models_version FROM stores ORDER BY name")
            let history = try db.prepare(
                "SELECT entries FROM change_sets WHERE store = ?1 AND last > ?2 ORDER BY first")
            while try stores.step() {
                let name = stores.text(0), epoch = stores.text(1)
                let version = try number(stores.int64(2), "store '\(name)'")
                let modelsVersion = try number(stores.int64(3), "store '\(name)'")
                guard modelsVersion <= version else { throw DiskError("store '\(name)' is damaged (models past its version)") }
                var models = StoreReplay(try loadModels(name, db: db, path: path), at: modelsVersion)
                history.reset()
                history.bind(1, name)
                let kept = UInt64(max(1, retain(name)))
                let cutoff = version > kept ? version - kept : 0
                // The retained change sets, and every one after the models' snapshot, to replay.
                history.bind(2, Int64(min(cutoff, modelsVersion)))
                var changeSets: [ChangeSet] = []
                var previous: UInt64?
                while try history.step() {
                    // A row holds the change sets one batch stored, as a JSON array of log entries.
                    let entries = try history.withBlob(0) { bytes in try parse(bytes, what: "change sets of store '\(name)'") }
                    guard case .array(let items) = entries else { throw DiskError("change sets of store '\(name)' are damaged") }
                    for item in items {
                        guard let changeSet = ReplicatedChangeSet.changeSet(of: name, item),
                              previous.map({ $0 + 1 == changeSet.version }) ?? true, changeSet.version <= version
                        else { throw DiskError("a change set of store '\(name)' is damaged") }
                        previous = changeSet.version
                        if changeSet.version > modelsVersion { try models.replay(changeSet) }
                        if changeSet.version > cutoff { changeSets.append(changeSet) }
                    }
                }
                guard models.version == version else {
                    throw DiskError("store '\(name)' is damaged (its change sets after version \(models.version) are missing)")
                }
                contents.stores.append(.init(
                    name: name, epoch: epoch, version: version, modelsVersion: modelsVersion, models: models.result,
                    history: changeSets, deleted: models.deleted))
            }
            let topics = try db.prepare("SELECT name, epoch, seq FROM topics ORDER BY name")
            let messages = try db.prepare(
                "SELECT seq, published_at, data FROM messages WHERE topic = ?1 AND seq > ?2 ORDER BY seq")
            while try topics.step() {
                let name = topics.text(0), epoch = topics.text(1), seq = try number(topics.int64(2), "topic '\(name)'")
                messages.reset()
                messages.bind(1, name)
                messages.bind(2, Int64(seq > UInt64(topicHistory) ? seq - UInt64(topicHistory) : 0))
                var kept: [DiskContents.Message] = []
                while try messages.step() {
                    let seq = try number(messages.int64(0), "a message of topic '\(name)'"), data = messages.blob(2)
                    // Sent on as stored, inside every replay's frames: text that is not JSON would
                    // break each of them.
                    do { try JSONParser.validateStored(data) } catch {
                        throw DiskError("message \(seq) of topic '\(name)' is damaged: \(error)")
                    }
                    kept.append(.init(seq: seq, publishedAt: UInt64(clamping: messages.int64(1)), data: data))
                }
                contents.topics.append(.init(name: name, epoch: epoch, seq: seq, messages: kept))
            }
            return contents
        } catch let error as DiskError {
            throw error
        } catch let error as SQLiteError {
            throw DiskError("the data file is damaged (\(error)); refusing to use it")
        } catch {
            throw DiskError("the data file is damaged (\(error)); refusing to use it")
        }
    }

    /// Stores past this many models are read by two threads, each with a connection of its own
    /// and half of the ids (the JSON parse is most of a start's time).
    static let parallelLoadModels: Int64 = 50_000

    /// The models of store `name`, each with its entity tag.
    private static func loadModels(_ name: String, db: SQLiteDatabase, path: String) throws -> [(id: String, value: JSONValue, tag: UInt64)] {
        let counting = try db.prepare("SELECT count(*) FROM models WHERE store = ?1")
        counting.bind(1, name)
        let count = try counting.step() ? counting.int64(0) : 0
        let median = try db.prepare("SELECT id FROM models WHERE store = ?1 ORDER BY id LIMIT 1 OFFSET ?2")
        median.bind(1, name)
        median.bind(2, count / 2)
        guard count > parallelLoadModels, try median.step() else {
            return try readModels(name, db: db, from: nil, below: nil, expected: Int(count))
        }
        let middle = median.text(0)
        let upper = Confined(PThreadLock<Result<[(id: String, value: JSONValue, tag: UInt64)], DiskError>?>(nil))
        let reader = WorkerThread.start {
            let result: Result<[(id: String, value: JSONValue, tag: UInt64)], DiskError>
            do {
                let second = try SQLiteDatabase(path: path)
                defer { second.close() }
                result = .success(try readModels(name, db: second, from: middle, below: nil, expected: Int(count - count / 2)))
            } catch let error as DiskError {
                result = .failure(error)
            } catch {
                result = .failure(DiskError("the data file is damaged (\(error)); refusing to use it"))
            }
            upper.value.withLock { $0 = result }
        }
        let lower = try readModels(name, db: db, from: nil, below: middle, expected: Int(count / 2))
        reader.join()
        guard let rest = upper.value.withLock({ $0 }) else { throw DiskError("the second model reader did not finish") }
        var all = lower
        all.reserveCapacity(Int(count))
        all += try rest.get()
        return all
    }

    /// The models of store `name` with ids in `from ..< below` (either end open when nil).
    private static func readModels(_ name: String, db: SQLiteDatabase, from: String?, below: String?, expected: Int) throws
        -> [(id: String, value: JSONValue, tag: UInt64)]
    {
        let statement = try db.prepare(
            "SELECT id, version, value FROM models WHERE store = ?1 AND id >= ?2 AND (?3 IS NULL OR id < ?3)")
        statement.bind(1, name)
        statement.bind(2, from ?? "")
        if let below { statement.bind(3, below) } else { statement.bindNull(3) }
        var loaded: [(id: String, value: JSONValue, tag: UInt64)] = []
        loaded.reserveCapacity(expected)
        while try statement.step() {
            let id = statement.text(0)
            let value = try statement.withBlob(2) { bytes in try parse(bytes, what: "model '\(id)' of store '\(name)'") }
            loaded.append((id, value, try number(statement.int64(1), "model '\(id)' of store '\(name)'")))
        }
        return loaded
    }

    /// A version or sequence number as stored: never negative but in a damaged file, which is
    /// refused as such rather than trapping.
    private static func number(_ stored: Int64, _ what: String) throws(DiskError) -> UInt64 {
        guard let number = UInt64(exactly: stored) else { throw DiskError("\(what) is damaged (a negative number)") }
        return number
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer, what: String) throws(DiskError) -> JSONValue {
        do {
            return try JSONParser.parseStored(Array(bytes))
        } catch {
            throw DiskError("\(what) is damaged: \(error)")
        }
    }

    /// This boot of the machine: page-cache writes of a process that crashed survive until the
    /// machine restarts, so only a new boot can have lost writes that were not synced. Nil when
    /// the file cannot be read (a container that hides it): no boot can then be told from
    /// another, so the caller takes it as a new one, never as the same.
    static func bootID(file path: String = "/proc/sys/kernel/random/boot_id") -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 64)
        guard fgets(&buffer, 64, file) != nil else { return nil }
        let boot = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).trimmingSuffixNewline()
        return boot.isEmpty ? nil : boot
    }
}

extension String {
    fileprivate func trimmingSuffixNewline() -> String {
        var text = self
        while text.last == "\n" { text.removeLast() }
        return text
    }
}
