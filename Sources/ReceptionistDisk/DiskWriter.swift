import ReceptionistJSON
import ReceptionistModel

/// The disk engine's writer: owns the database on the writer thread, and writes each batch in
/// one transaction. Writer thread only.
///
/// Invariants: each store's versions and each topic's numbers are stored contiguously (a write
/// that does not follow on is refused, never stored with a hole); a store's writes are stored only
/// for the store object that is live under its name, in the generation it is in.
final class DiskWriter {
    let db: SQLiteDatabase
    private let options: DiskOptions
    private let insertChange, setStoreVersion, compactChanges: SQLiteStatement
    let upsertModel, deleteModel, setModelsVersion: SQLiteStatement
    private let insertStore, deleteStoreRow, deleteStoreModels, deleteStoreChanges: SQLiteStatement
    private let upsertTopic, insertMessage, compactMessages, deleteTopicRow, deleteTopicMessages: SQLiteStatement
    private let idempotency: DiskIdempotencyTable
    /// The store object live under each name, and the next version it must store (while a batch
    /// runs, a store it writes to has the next version in its `DiskStoreBatch`).
    var stores: [String: (store: ObjectIdentifier, next: UInt64)] = [:]
    /// The next number each topic must store, in its epoch.
    private var topics: [String: (next: UInt64, epoch: String)] = [:]
    private var lastCheckpoint = Clock.microsecondsSinceEpoch()
    private var writtenSinceCheckpoint = false
    /// When failed batches, and stored ones after them, are told (`reportFailing`): writes that
    /// fail and succeed by turns on a nearly full disk must not flood the log.
    private var failures = FailureLog()

    /// Compaction runs for a store or topic every this many writes to it.
    static let compactEvery: UInt64 = 256

    init(db: SQLiteDatabase, options: DiskOptions, contents: DiskContents) throws(SQLiteError) {
        self.db = db
        self.options = options
        insertChange = try db.prepare("INSERT INTO change_sets(store, first, last, entries) VALUES (?1, ?2, ?3, ?4)")
        upsertModel = try db.prepare("INSERT OR REPLACE INTO models(store, id, version, value) VALUES (?1, ?2, ?3, ?4)")
        deleteModel = try db.prepare("DELETE FROM models WHERE store = ?1 AND id = ?2")
        setStoreVersion = try db.prepare("UPDATE stores SET version = ?2 WHERE name = ?1")
        setModelsVersion = try db.prepare("UPDATE stores SET models_version = ?2 WHERE name = ?1")
        compactChanges = try db.prepare("DELETE FROM change_sets WHERE store = ?1 AND last <= ?2")
        insertStore = try db.prepare("INSERT OR REPLACE INTO stores(name, epoch, version, models_version) VALUES (?1, ?2, 0, 0)")
        deleteStoreRow = try db.prepare("DELETE FROM stores WHERE name = ?1")
        deleteStoreModels = try db.prepare("DELETE FROM models WHERE store = ?1")
        deleteStoreChanges = try db.prepare("DELETE FROM change_sets WHERE store = ?1")
        upsertTopic = try db.prepare("INSERT OR REPLACE INTO topics(name, epoch, seq) VALUES (?1, ?2, ?3)")
        insertMessage = try db.prepare("INSERT OR REPLACE INTO messages(topic, seq, published_at, data) VALUES (?1, ?2, ?3, ?4)")
        compactMessages = try db.prepare("DELETE FROM messages WHERE topic = ?1 AND seq <= ?2")
        deleteTopicRow = try db.prepare("DELETE FROM topics WHERE name = ?1")
        deleteTopicMessages = try db.prepare("DELETE FROM messages WHERE topic = ?1")
        idempotency = try DiskIdempotencyTable(db: db, options: options)
        for topic in contents.topics { topics[topic.name] = (topic.seq + 1, topic.epoch) }
        let now = Clock.microsecondsSinceEpoch()
        for store in contents.stores {
            expectedVersions[store.name] = store.version + 1
            var models = DiskStoreModels(version: store.modelsVersion, stored: store.version, now: now)
            // Deleted by change sets the start replayed: the next snapshot deletes their rows.
            models.deleted = store.deleted
            storeModels[store.name] = models
        }
    }

    /// Each store's models as the writer keeps them: the version they are stored at, and the
    /// next snapshot (`DiskWriter+Models`).
    var storeModels: [String: DiskStoreModels] = [:]

    /// Loaded stores wait here for their live object (`adopt`), by name: the next version.
    private var expectedVersions: [String: UInt64] = [:]

    /// What this batch writes, by store, and the store of the last change record (most records
    /// follow one of the same store).
    private var pending: [String: DiskStoreBatch] = [:]
    private var recent: DiskStoreBatch?
    /// Emptied row buffers kept for the next rows: a buffer grown to a row's size is reused, not
    /// allocated (and its pages faulted in) again for every batch. At most `spareLimit`.
    private var spares: [JSONBuffer] = []
    static let spareLimit = 4
    /// A row of change sets is written once its text reaches this, so no row, and no buffer,
    /// grows with the batch: a batch of large change sets was one row of many megabytes, copied
    /// as it grew.
    static let rowBytes = 1 << 20

    /// What a batch's writes came to, to be answered once its transaction is committed.
    private struct Outcome {
        var settles: [(store: ModelStore, version: UInt64, generation: UInt64)] = []
        var refused: [(store: ModelStore, generation: UInt64, error: StoreError)] = []
        var messages: [(DiskMessage, StoreError?)] = []
        var signals: [DiskSignal] = []
        var keys: [@Sendable (StoreError?) -> Void] = []
        var wroteKeys = false
        var stored = 0
    }

    /// Writes `batch` in one transaction, counts it and settles it.
    func write(_ first: [DiskWrite], engine: DiskEngine) {
        var batch = first
        let before = (stores, topics, expectedVersions, storeModels)
        for slot in pending.values { if let row = slot.row { recycle(row.text) } }  // left by a batch that failed
        pending = [:]
        recent = nil
        var outcome = Outcome()
        do throws(SQLiteError) {
            try db.execute("BEGIN IMMEDIATE")
            for write in batch { try apply(write, to: &outcome) }
            // A snapshot taken here waits for the change sets up to its version, which are
            // queued: they join this transaction (once), so the models' version keeps up with
            // the store's and compaction is not held back by the depth of the queue.
            if try writeTouchedModels() {
                let queued = engine.takeQueued()
                batch += queued
                for write in queued { try apply(write, to: &outcome) }
                _ = try writeTouchedModels()
            }
            if outcome.wroteKeys { try idempotency.pruneIfDue(now: Clock.microsecondsSinceEpoch()) }
            try db.execute("COMMIT")
            writtenSinceCheckpoint = true
        } catch {
            try? db.execute("ROLLBACK")
            (stores, topics, expectedVersions, storeModels) = before
            let reason = error.isFull ? "the disk is full" : "\(error)"
            let failure = StoreError.storageFailed(reason)
            engine.counted(batch: batch.count, stored: 0, committed: false)
            if failures.failed(now: Clock.monotonicSeconds()) != nil { options.reportFailing(reason) }
            fail(batch, failure, engine: engine)
            return
        }
        // Counted before anything is answered: whoever is told of a write finds it counted.
        engine.counted(batch: batch.count, stored: outcome.stored)
        if failures.succeeded() { options.reportFailing(nil) }
        // Settled in order, on the notifier: a store's observers may block on the loop.
        // The batch goes with the closure, so the notifier thread, lightly loaded, releases its
        // change sets: freeing what the committers made was a sixth of this thread's time, and
        // each free of another thread's memory takes its allocator's lock.
        let released = batch
        pending = [:]
        recent = nil
        engine.settleLater { [settles = outcome.settles, refused = outcome.refused] in
            withExtendedLifetime(released) {}
            for (store, version, generation) in settles { store.settle(through: version, generation: generation) }
            for (store, generation, error) in refused { store.unsettle(generation: generation, because: error) }
        }
        for (message, problem) in outcome.messages { message.completion(problem) }
        for signal in outcome.signals { signal.finish(nil) }
        for completion in outcome.keys { completion(nil) }
    }

    /// Writes one of a batch's writes into the open transaction and notes what it came to.
    private func apply(_ write: DiskWrite, to outcome: inout Outcome) throws(SQLiteError) {
        switch write {
        case .change(let record, let store):
            if let problem = try writeChange(record, store) {
                outcome.refused.append((store, record.generation, problem))
                return
            }
            // Change sets of one store that follow one another settle in one call.
            if let last = outcome.settles.last, last.store === store, last.generation == record.generation {
                outcome.settles[outcome.settles.count - 1].version = record.changeSet.version
            } else {
                outcome.settles.append((store, record.changeSet.version, record.generation))
            }
            outcome.stored += 1
        case .createStore(let store, let signal):
            try createStore(store)
            outcome.signals.append(signal)
            outcome.stored += 1
        case .deleteStore(let name, let signal):
            try deleteStore(name)
            outcome.signals.append(signal)
            outcome.stored += 1
        case .message(let message):
            let problem = try writeMessage(message)
            outcome.messages.append((message, problem))
            if problem == nil { outcome.stored += 1 }
        case .forgetTopic(let name):
            try forgetTopic(name)
            outcome.stored += 1
        case .idempotency(let write):
            try idempotency.apply(write.change)
            if let completion = write.completion { outcome.keys.append(completion) }
            outcome.wroteKeys = true
            outcome.stored += 1
        }
    }

    private func fail(_ batch: [DiskWrite], _ failure: StoreError, engine: DiskEngine) {
        var undone: [(ModelStore, UInt64)] = []
        for write in batch {
            switch write {
            case .change(let record, let store): undone.append((store, record.generation))
            case .createStore(_, let signal), .deleteStore(_, let signal): signal.finish(failure)
            case .message(let message): message.completion(failure)
            case .forgetTopic: break  // kept on disk: a message 1 of the name replaces it, a start brings it back
            case .idempotency(let write): write.completion?(failure)
            }
        }
        engine.settleLater { [undone] in
            for (store, generation) in undone { store.unsettle(generation: generation, because: failure) }
        }
    }

    /// Writes one change set; returns why it was refused instead, if it was.
    private func writeChange(_ record: JournalRecord, _ store: ModelStore) throws(SQLiteError) -> StoreError? {
        guard let slot = recent.flatMap({ $0.store === store ? $0 : nil }) ?? batch(of: store) else {
            return .noSuchStore(store.name)
        }
        recent = slot
        let version = record.changeSet.version
        guard store.isCurrent(generation: record.generation), version == slot.next else {
            return .storageFailed("change set \(version) of '\(slot.name)' does not follow the stored version \(slot.next - 1)")
        }
        let text: JSONBuffer
        if let row = slot.row {
            text = row.text
            text.removeLast()  // the array's `]`
            text.append(UInt8(ascii: ","))
            slot.row = (row.first, version, text)
        } else {
            text = spares.popLast() ?? JSONBuffer(capacity: 4096)
            text.append(UInt8(ascii: "["))
            slot.row = (version, version, text)
        }
        ReplicatedChangeSet.write(record.changeSet, to: text)
        text.append(UInt8(ascii: "]"))
        if text.count >= Self.rowBytes { try writeRow(of: slot) }
        slot.count += 1
        Self.noteDeleted(record.changeSet, in: slot)
        if version % Self.compactEvery == 0 {
            try compact(slot.name, stored: version, modelsVersion: storeModels[slot.name]?.version ?? 0)
        }
        slot.next = version + 1
        return nil
    }

    /// This batch's writes for `store`, if it is the store object live under its name.
    private func batch(of store: ModelStore) -> DiskStoreBatch? {
        let name = store.name
        if let slot = pending[name] { return slot.store === store ? slot : nil }
        if stores[name] == nil, let next = expectedVersions[name] {
            // A store loaded at start: its object is the first to write to it.
            stores[name] = (ObjectIdentifier(store), next)
            expectedVersions[name] = nil
        }
        guard let live = stores[name], live.store == ObjectIdentifier(store) else { return nil }
        let slot = DiskStoreBatch(name: name, store: store, next: live.next)
        pending[name] = slot
        return slot
    }

    /// Deletes the change sets of store `name` older than the retained ones, never one after the
    /// stored models' version (those rebuild the models at the next start).
    func compact(_ name: String, stored: UInt64, modelsVersion: UInt64) throws(SQLiteError) {
        let retain = UInt64(max(1, options.retainOf(name)))
        guard stored > retain, modelsVersion > 0 else { return }
        compactChanges.bind(1, name)
        compactChanges.bind(2, Int64(min(stored - retain, modelsVersion)))
        try compactChanges.run()
    }

    /// Writes each store's change sets of the batch (the rest of its row), its version, and its
    /// models' snapshot when one is due and ready. True when a snapshot waits for change sets
    /// not yet stored.
    private func writeTouchedModels() throws(SQLiteError) -> Bool {
        let now = Clock.microsecondsSinceEpoch()
        var waiting = false
        for slot in pending.values {
            try writeRow(of: slot)
            stores[slot.name] = (slot.object, slot.next)
            setStoreVersion.bind(1, slot.name)
            setStoreVersion.bind(2, Int64(slot.next - 1))
            try setStoreVersion.run()
            if try updateModels(of: slot, now: now) { waiting = true }
        }
        return waiting
    }

    /// Writes the store's pending change sets as one row, and keeps its buffer for the next.
    private func writeRow(of slot: DiskStoreBatch) throws(SQLiteError) {
        guard let row = slot.row else { return }
        slot.row = nil
        defer { recycle(row.text) }
        insertChange.bind(1, slot.name)
        insertChange.bind(2, Int64(row.first))
        insertChange.bind(3, Int64(row.last))
        let failure: SQLiteError? = row.text.withUnsafeBytes { bytes in
            do throws(SQLiteError) { try insertChange.run(binding: 4, blob: bytes) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }

    private func recycle(_ text: JSONBuffer) {
        guard spares.count < Self.spareLimit, text.allocatedCount <= 2 * Self.rowBytes else { return }
        text.removeAll()
        spares.append(text)
    }

    private func createStore(_ store: ModelStore) throws(SQLiteError) {
        try deleteStore(store.name)
        insertStore.bind(1, store.name)
        insertStore.bind(2, store.epoch)
        try insertStore.run()
        stores[store.name] = (ObjectIdentifier(store), 1)
        storeModels[store.name] = DiskStoreModels(version: 0, stored: 0, now: Clock.microsecondsSinceEpoch())
    }

    private func deleteStore(_ name: String) throws(SQLiteError) {
        // Models and change sets of the store's earlier life in this batch are gone with it.
        if let slot = pending.removeValue(forKey: name), let row = slot.row { recycle(row.text) }
        storeModels[name] = nil
        if recent?.name == name { recent = nil }
        for statement in [deleteStoreModels, deleteStoreChanges, deleteStoreRow] {
            statement.bind(1, name)
            try statement.run()
        }
        stores[name] = nil
        expectedVersions[name] = nil
    }

    /// Writes one message; returns why it was refused instead, if it was.
    private func writeMessage(_ message: DiskMessage) throws(SQLiteError) -> StoreError? {
        // Message 1 of another epoch begins a topic the gateway made anew (forgotten after
        // --topic-ttl): what an earlier life left under the name goes, should its forgetting not
        // have been stored.
        if message.seq == 1, let stored = topics[message.topic], stored.epoch != message.epoch { try forgetTopic(message.topic) }
        let expected = topics[message.topic]?.next ?? 1
        guard message.seq == expected else {
            return .storageFailed("message \(message.seq) of '\(message.topic)' does not follow the stored number \(expected - 1)")
        }
        upsertTopic.bind(1, message.topic)
        upsertTopic.bind(2, message.epoch)
        upsertTopic.bind(3, Int64(message.seq))
        try upsertTopic.run()
        insertMessage.bind(1, message.topic)
        insertMessage.bind(2, Int64(message.seq))
        insertMessage.bind(3, Int64(message.publishedAt))
        insertMessage.bind(4, blob: message.data)
        try insertMessage.run()
        if message.seq % Self.compactEvery == 0, message.seq > UInt64(options.topicHistory) {
            compactMessages.bind(1, message.topic)
            compactMessages.bind(2, Int64(message.seq - UInt64(options.topicHistory)))
            try compactMessages.run()
        }
        topics[message.topic] = (message.seq + 1, message.epoch)
        return nil
    }

    /// Deletes a topic and its messages.
    private func forgetTopic(_ name: String) throws(SQLiteError) {
        for statement in [deleteTopicMessages, deleteTopicRow] {
            statement.bind(1, name)
            try statement.run()
        }
        topics[name] = nil
    }

    /// With `--fsync interval`: syncs what was written, at most once an interval.
    func checkpointIfDue(now: UInt64) {
        guard options.fsync == .interval, writtenSinceCheckpoint,
              now >= lastCheckpoint + UInt64(options.intervalSeconds * 1_000_000)
        else { return }
        try? db.checkpoint()
        lastCheckpoint = now
        writtenSinceCheckpoint = false
    }

    /// A clean end: everything synced, the directory marked clean, the database closed.
    func close() {
        writeFinalSnapshots()
        try? db.checkpoint()
        try? DiskMeta.write(db, clean: true, fsync: options.fsync.rawValue, boot: DiskSchema.bootID(file: options.bootIDFile) ?? "")
        db.close()
    }
}
