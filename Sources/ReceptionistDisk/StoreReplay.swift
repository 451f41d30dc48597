import ReceptionistJSON
import ReceptionistModel

/// A store's models loaded from their snapshot, brought forward by replaying the change sets
/// stored after it, in order: each change's new value put at its key path (a whole model put or
/// deleted), and the model's tag moved to the change set's version.
struct StoreReplay {
    private var models: [(id: String, value: JSONValue, tag: UInt64)]
    /// Where each model is in `models`, made only once there is something to replay.
    private var index: [String: Int]?
    /// Positions of the models deleted, left in place until the end so that positions stay valid.
    private var removed: Set<Int> = []
    private(set) var version: UInt64
    /// The models the replay deleted, each with the version that deleted it: their rows are still
    /// stored, and the writer's next snapshot must delete them (`DiskStoreModels.deleted`).
    private(set) var deleted: [(id: String, version: UInt64)] = []

    init(_ models: [(id: String, value: JSONValue, tag: UInt64)], at version: UInt64) {
        self.models = models
        self.version = version
    }

    /// Applies `changeSet`, the one after `version`; throws if a change cannot have been made on
    /// these models (the file is damaged).
    mutating func replay(_ changeSet: ChangeSet) throws(DiskError) {
        guard changeSet.version == version + 1 else {
            throw DiskError("store '\(changeSet.store)' is damaged (change set \(changeSet.version) after \(version))")
        }
        if index == nil {
            var built: [String: Int] = [:]
            built.reserveCapacity(models.count)
            for (position, model) in models.enumerated() { built[model.id] = position }
            index = built
        }
        for change in changeSet.changes {
            let position = index?[change.model]
            if change.keyPath.count == 0 {
                switch (position, change.newValue) {
                case (let position?, let value?):
                    models[position].value = value
                    models[position].tag = changeSet.version
                case (nil, let value?):
                    index?[change.model] = models.count
                    models.append((change.model, value, changeSet.version))
                case (let position?, nil):
                    removed.insert(position)
                    index?[change.model] = nil
                    deleted.append((change.model, changeSet.version))
                case (nil, nil):
                    throw DiskError("store '\(changeSet.store)' is damaged (model '\(change.model)' deleted twice)")
                }
            } else {
                guard let position else {
                    throw DiskError("store '\(changeSet.store)' is damaged (model '\(change.model)' changed while absent)")
                }
                _ = change.keyPath.withComponents { models[position].value.replaceValue(change.newValue, along: $0) }
                models[position].tag = changeSet.version
            }
        }
        version = changeSet.version
    }

    /// The models as they are after the replay.
    var result: [(id: String, value: JSONValue, tag: UInt64)] {
        removed.isEmpty ? models : models.indices.filter { !removed.contains($0) }.map { models[$0] }
    }
}
