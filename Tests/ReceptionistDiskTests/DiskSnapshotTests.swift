import Glibc
@testable import ReceptionistDisk
import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync
import Testing

/// A store's models kept as a snapshot and the change sets after it (`DiskWriter+Models`,
/// `StoreReplay`): what a crash, a clean close and an older data format leave.
@Suite struct DiskSnapshotTests {
    /// Copies the database as a crash leaves it (the engine still open, its writes in the log).
    private static func copyAsCrashed(_ directory: String) -> String {
        let copy = temporaryDirectory()
        for file in ["receptionist.sqlite3", "receptionist.sqlite3-wal"] {
            guard let input = fopen(directory + "/" + file, "rb"), let output = fopen(copy + "/" + file, "wb") else { continue }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while case let read = fread(&buffer, 1, buffer.count, input), read > 0 { fwrite(buffer, 1, read, output) }
            fclose(input)
            fclose(output)
        }
        return copy
    }

    /// The models as a store holds them (its head), sorted by id, with their tags.
    private static func models(of store: ModelStore) -> [String] {
        store.journalSnapshot(changedAfter: 0).models.map { "\($0.id) \($0.tag) \(JSONWriter.string($0.value))" }.sorted()
    }

    private static func models(of contents: DiskContents.Store) -> [String] {
        contents.models.map { "\($0.id) \($0.tag) \(JSONWriter.string($0.value))" }.sorted()
    }

    /// Puts, nested sets, removals, deletes and models made again: `rounds` times over 20 models.
    private static func churn(_ store: ModelStore, rounds: Int, from start: Int) throws {
        for n in start..<(start + rounds) {
            let id = "m\(n % 20)"
            switch n % 5 {
            case 0: try store.commit([.put(model: id, value: ["n": .number(JSONNumber(n)), "pos": ["x": 1]])])
            case 1: try store.commit([.put(model: id, value: ["n": 0]), .set(model: id, keyPath: "pos.x", value: .number(JSONNumber(n)))])
            case 2: try store.commit([.put(model: id, value: ["n": 1]), .set(model: id, keyPath: "n", value: nil)])
            case 3: try store.commit([.put(model: id, value: ["n": 2]), .delete(model: id)])
            default: try store.commit([.put(model: id, value: ["n": 3]), .delete(model: id), .put(model: id, value: ["again": true])])
            }
        }
    }

    @Test func aCrashLeavesTheModelsToBeRebuiltFromTheSnapshotAndTheChangeSetsAfterIt() throws {
        let directory = temporaryDirectory()
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory, fsync: .interval))
        let store = try StoreRegistry(historyLimit: 100, journal: engine).create("s")
        // Past one snapshot (taken every `snapshotEvery` change sets), then churn after it.
        try Self.churn(store, rounds: Int(DiskWriter.snapshotEvery) + 500, from: 0)
        let crashed = Self.copyAsCrashed(directory)
        let expected = Self.models(of: store)
        engine.close()
        let db = try SQLiteDatabase(path: crashed + "/receptionist.sqlite3")
        let modelsVersion = try db.integer("SELECT models_version FROM stores") ?? -1
        db.close()
        // A snapshot was stored, and the change sets after it are replayed on top of it.
        #expect(modelsVersion > 0 && modelsVersion < Int64(store.version))
        let (reopened, contents) = try DiskEngine.open(DiskOptions(directory: crashed, fsync: .interval))
        reopened.close()
        let loaded = try #require(contents.stores.first)
        #expect(loaded.version == store.version && loaded.modelsVersion == UInt64(modelsVersion))
        #expect(Self.models(of: loaded) == expected)
        #expect(expected.count > 5)
    }

    /// A model deleted after the stored snapshot, then a crash: the start replays the delete,
    /// and the next snapshot, taken by the restarted engine, deletes the model's row too. (It
    /// kept the row, as the writer did not know of the replayed delete, and the start after
    /// that brought the model back.)
    @Test func aModelDeletedAfterTheSnapshotStaysDeletedPastTheNextOne() throws {
        let directory = temporaryDirectory()
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory, fsync: .interval))
        let store = try StoreRegistry(historyLimit: 100, journal: engine).create("s")
        try store.commit([.put(model: "x", value: ["gone": false])])
        let fill = Int(DiskWriter.snapshotEvery) + 10
        for n in 0..<fill { try store.commit([.put(model: "y", value: ["n": .number(JSONNumber(n))])]) }
        try store.commit([.delete(model: "x")])
        let crashed = Self.copyAsCrashed(directory)
        engine.close()
        var db = try SQLiteDatabase(path: crashed + "/receptionist.sqlite3")
        // The snapshot stored holds "x"; the delete is a change set after it.
        #expect(try db.integer("SELECT count(*) FROM models WHERE id = 'x'") == 1)
        #expect(try (db.integer("SELECT models_version FROM stores") ?? 0) < Int64(fill + 2))
        db.close()

        let (restarted, contents) = try DiskEngine.open(DiskOptions(directory: crashed, fsync: .interval))
        let loaded = try #require(contents.stores.first)
        #expect(!Self.models(of: loaded).contains { $0.hasPrefix("x ") })
        let registry = StoreRegistry(historyLimit: 100, journal: restarted)
        let again = registry.restore("s", epoch: loaded.epoch, version: loaded.version, models: loaded.models, history: loaded.history)
        for n in 0..<fill { try again.commit([.put(model: "y", value: ["n": .number(JSONNumber(n))])]) }
        restarted.close()
        db = try SQLiteDatabase(path: crashed + "/receptionist.sqlite3")
        #expect(try db.integer("SELECT models_version FROM stores") == Int64(loaded.version) + Int64(fill))
        #expect(try db.integer("SELECT count(*) FROM models WHERE id = 'x'") == 0)
        db.close()
        let (reopened, after) = try DiskEngine.open(DiskOptions(directory: crashed, fsync: .interval))
        reopened.close()
        #expect(Self.models(of: try #require(after.stores.first)) == ["y \(loaded.version + UInt64(fill)) {\"n\":\(fill - 1)}"])
    }

    @Test func aSnapshotTakesTheChangeSetsStillQueuedIntoItsTransaction() throws {
        let directory = temporaryDirectory()
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory, fsync: .interval))
        let store = try StoreRegistry(historyLimit: 100, journal: engine).create("s")
        let count = Int(DiskWriter.snapshotEvery) + 476
        let answered = ConditionLock(0)
        engine.holdWriter(true)
        for n in 0..<count {
            store.commit([.put(model: "m\(n % 50)", value: ["n": .number(JSONNumber(n))])]) { _ in
                answered.withLock { $0 += 1 }
                answered.broadcast()
            }
        }
        let syncs = engine.syncs.load(ordering: .relaxed)
        engine.holdWriter(false)
        #expect(answered.wait(seconds: 10, until: { $0 == count }, then: { _, done in done }))
        // The writer takes at most `maxBatch` writes; the snapshot due after them is of version
        // `count`, so the rest join that transaction and it is written there.
        #expect(engine.syncs.load(ordering: .relaxed) - syncs == 1)
        let crashed = Self.copyAsCrashed(directory)
        let expected = Self.models(of: store)
        engine.close()
        let db = try SQLiteDatabase(path: crashed + "/receptionist.sqlite3")
        #expect(try db.integer("SELECT models_version FROM stores") == Int64(count))
        db.close()
        let (reopened, contents) = try DiskEngine.open(DiskOptions(directory: crashed, fsync: .interval))
        reopened.close()
        #expect(Self.models(of: try #require(contents.stores.first)) == expected)
    }

    @Test func aCleanCloseStoresTheModelsAtTheStoresVersion() throws {
        let directory = temporaryDirectory()
        let expected: [String]
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory, fsync: .interval))
            let store = try StoreRegistry(historyLimit: 100, journal: engine).create("s")
            try Self.churn(store, rounds: 300, from: 7)
            expected = Self.models(of: store)
            engine.close()
        }
        let db = try SQLiteDatabase(path: directory + "/receptionist.sqlite3")
        let versions = try db.integer("SELECT version * 1000000 + models_version FROM stores") ?? -1
        db.close()
        #expect(versions == 300 * 1_000_001)
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory, fsync: .interval))
        engine.close()
        #expect(Self.models(of: try #require(contents.stores.first)) == expected)
    }

    @Test func aFormatTwoFileIsBroughtForwardWithItsModelsAtTheStoresVersion() throws {
        let directory = temporaryDirectory()
        let expected: [String]
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            let store = try StoreRegistry(historyLimit: 100, journal: engine).create("s")
            try Self.churn(store, rounds: 40, from: 0)
            expected = Self.models(of: store)
            engine.close()
        }
        // Format 2 had no models_version: its models were always at the store's version.
        let db = try SQLiteDatabase(path: directory + "/receptionist.sqlite3")
        try db.execute("ALTER TABLE stores DROP COLUMN models_version; PRAGMA user_version = 2;")
        db.close()
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
        engine.close()
        let loaded = try #require(contents.stores.first)
        #expect(loaded.version == 40 && loaded.modelsVersion == 40)
        #expect(Self.models(of: loaded) == expected)
    }
}
