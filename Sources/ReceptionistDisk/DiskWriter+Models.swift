import ReceptionistJSON
import ReceptionistModel

/// The models of each store, kept as snapshots (see `DiskStoreModels`). Writer thread only.
extension DiskWriter {
    /// A store's next snapshot is taken after this many change sets, or `snapshotSeconds` after
    /// the last one if it has any since: so a start after a crash replays at most about this many.
    static let snapshotEvery: UInt64 = 1024
    static let snapshotSeconds = 1.0

    /// Notes the models `changeSet` deleted (read in place: iterating copied each change whole).
    static func noteDeleted(_ changeSet: ChangeSet, in slot: DiskStoreBatch) {
        changeSet.changes.withUnsafeBufferPointer { changes in
            guard let base = changes.baseAddress else { return }
            for index in changes.indices {
                let change = base + index
                if change.pointee.newValue == nil, change.pointee.keyPath.count == 0 {
                    slot.deleted.append((change.pointee.model, changeSet.version))
                }
            }
        }
    }

    /// After `slot`'s change sets are written: takes the store's next snapshot when it is due,
    /// and writes the one waiting once every change set up to its version is stored. True when
    /// one still waits.
    func updateModels(of slot: DiskStoreBatch, now: UInt64) throws(SQLiteError) -> Bool {
        let stored = slot.next - 1
        var models = storeModels[slot.name] ?? DiskStoreModels(version: 0, stored: 0, now: now)
        models.store = slot.store
        models.since += UInt64(slot.count)
        models.deleted += slot.deleted
        slot.count = 0
        slot.deleted = []
        if models.waiting == nil, models.since > 0,
           models.since >= Self.snapshotEvery || now >= models.takenAt + UInt64(Self.snapshotSeconds * 1_000_000)
        {
            models.waiting = slot.store.journalSnapshot(changedAfter: models.version)
            models.since = 0
            models.takenAt = now
        }
        if let snapshot = models.waiting, snapshot.version <= stored {
            models.waiting = nil
            // A snapshot of change sets the store has undone since (its generation moved on) is
            // dropped; the next is taken from what the store holds then.
            if slot.store.isCurrent(generation: snapshot.generation) {
                try write(snapshot, of: slot.name, stored: stored, deleted: &models.deleted)
                models.version = snapshot.version
            }
        }
        storeModels[slot.name] = models
        return models.waiting != nil
    }

    /// Writes `snapshot` (the models changed since the stored version, and the rows of the ones
    /// deleted up to its version gone), moves the stored models' version to it, and compacts the
    /// change sets it no longer needs past the retained ones (`stored`: the store's version).
    private func write(
        _ snapshot: JournalSnapshot, of name: String, stored: UInt64, deleted: inout [(id: String, version: UInt64)]
    ) throws(SQLiteError) {
        var present: Set<String> = []
        if deleted.contains(where: { $0.version <= snapshot.version }) { present = Set(snapshot.models.map(\.id)) }
        for model in snapshot.models {
            upsertModel.bind(1, name)
            upsertModel.bind(2, model.id)
            upsertModel.bind(3, Int64(model.tag))
            upsertModel.bind(4, blob: JSONWriter.encode(model.value))
            try upsertModel.run()
        }
        // A model deleted up to the snapshot and not there at it (not made again) is gone.
        for gone in deleted where gone.version <= snapshot.version && !present.contains(gone.id) {
            deleteModel.bind(1, name)
            deleteModel.bind(2, gone.id)
            try deleteModel.run()
        }
        deleted.removeAll { $0.version <= snapshot.version }
        setModelsVersion.bind(1, name)
        setModelsVersion.bind(2, Int64(snapshot.version))
        try setModelsVersion.run()
        try compact(name, stored: stored, modelsVersion: snapshot.version)
    }

    /// At a clean close, once everything queued is stored: each store's models at its stored
    /// version, so that the next start replays nothing. A store whose head is past what is stored
    /// (or that was never written to since the start) keeps its change sets to replay instead.
    func writeFinalSnapshots() {
        var due: [(String, JournalSnapshot)] = []
        for (name, models) in storeModels {
            guard let store = models.store, let live = stores[name], live.store == ObjectIdentifier(store) else { continue }
            let stored = live.next - 1
            guard models.version < stored else { continue }
            let snapshot = store.journalSnapshot(changedAfter: models.version)
            if snapshot.version == stored { due.append((name, snapshot)) }
        }
        guard !due.isEmpty else { return }
        do throws(SQLiteError) {
            try db.execute("BEGIN IMMEDIATE")
            for (name, snapshot) in due {
                var deleted = storeModels[name]?.deleted ?? []
                try write(snapshot, of: name, stored: snapshot.version, deleted: &deleted)
                storeModels[name]?.deleted = deleted
                storeModels[name]?.version = snapshot.version
            }
            try db.execute("COMMIT")
        } catch {
            // The change sets are stored: the next start replays them.
            try? db.execute("ROLLBACK")
        }
    }
}
