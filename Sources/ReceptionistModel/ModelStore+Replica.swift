import Glibc
import ReceptionistJSON

/// A store as a replica of a shared log (see `StoreReplication`).
///
/// Invariants:
/// - A replica changes only by `applyReplicated` (exactly the next version) and `resetReplica`
///   (a whole new state); both run on one thread (the gateway's `SerialWorker`), in log order.
/// - A commit is acknowledged only once the log has taken it and this replica has applied it, so
///   a reader on this node sees its own writes, and a commit the log refused is never applied.
extension ModelStore {
    /// How long a committer waits for its own change set to come back from the log.
    static let replicaWaitSeconds = 10.0
    /// Commits retried after conflicting with other nodes' commits.
    static let maxReplicatedAttempts = 16

    func commitReplicated(_ operations: [StoreOperation], through replication: any StoreReplication) throws(StoreError) -> ChangeSet {
        let result: Result<ChangeSet, StoreError> = replicatedCommitLock.withLock { attempts in
            for _ in 0..<Self.maxReplicatedAttempts {
                attempts += 1
                let computed: Result<(UInt64, [ModelChange], [String: JSONValue?]), StoreError> = state.withLock { state in
                    // Only the touched models are copied and edited; the replica is unchanged.
                    var touched: [String: JSONValue] = [:]
                    for operation in operations {
                        if let value = state.models[operation.model] { touched[operation.model] = value }
                    }
                    do throws(StoreError) {
                        let changes = try Self.apply(operations, to: &touched)
                        var after: [String: JSONValue?] = [:]
                        for operation in operations { after[operation.model] = .some(touched[operation.model]) }
                        return .success((state.version, changes, after))
                    } catch {
                        return .failure(error)
                    }
                }
                let base: UInt64, changes: [ModelChange], models: [String: JSONValue?]
                switch computed {
                case .success(let value): (base, changes, models) = value
                case .failure(let error): return .failure(error)
                }
                let candidate = ChangeSet(
                    store: name, version: base + 1, committedAtMicroseconds: Clock.microsecondsSinceEpoch(), changes: changes)
                switch replication.commit(candidate, models: models, expectedVersion: base) {
                case .committed(let version):
                    guard waitUntilApplied(version, seconds: Self.replicaWaitSeconds) else {
                        return .failure(.outcomeUnknown("committed as version \(version), but not yet replicated to this node"))
                    }
                    return .success(ChangeSet(
                        store: name, version: version, committedAtMicroseconds: candidate.committedAtMicroseconds,
                        changes: changes))
                case .conflict(let current) where current < base:
                    // The log is behind this replica: it was lost and started again. The replica is
                    // re-read from it (the engine sees the same answer); the caller may retry then.
                    return .failure(.unavailable("the store's log in Redis is behind this node (Redis lost data); it is being re-read; retry"))
                case .conflict(let current):
                    // Another node committed first: catch up with it, then recompute.
                    _ = waitUntilApplied(current, seconds: Self.replicaWaitSeconds)
                case .failed(let error):
                    return .failure(error)
                }
            }
            return .failure(.unavailable("too many conflicting commits from other nodes; retry"))
        }
        return try result.get()
    }

    /// Waits until the replica has applied `version`. Returns false on time-out.
    public func waitUntilApplied(_ version: UInt64, seconds: Double) -> Bool {
        appliedVersion.wait(seconds: seconds, until: { $0 >= version }, then: { _, done in done })
    }

    /// Applies the log's change set `version`, which must be the next one, and notifies observers.
    /// Returns false, changing nothing, when it is not the next version or does not fit the state
    /// (the caller then resets the replica from a snapshot).
    public func applyReplicated(version: UInt64, committedAt: UInt64, changes: [ReplicatedChange]) -> Bool {
        let applied: ChangeSet? = commitLock.withLock { notified in
            let changeSet: ChangeSet? = state.withLock { state in
                guard version == state.version + 1 else { return nil }
                var models = state.models
                state.models = [:]  // keep `models` uniquely referenced while it is edited
                var originals: [String: JSONValue?] = [:]
                var out: [ModelChange] = []
                out.reserveCapacity(changes.count)
                var fits = true
                for change in changes {
                    let id = change.model
                    if originals[id] == nil { originals[id] = .some(models[id]) }
                    if change.keyPath.components.isEmpty {
                        let old = models[id]
                        if let value = change.value { models[id] = value } else { models.removeValue(forKey: id) }
                        out.append(ModelChange(model: id, keyPath: .whole, oldValue: old, newValue: change.value))
                    } else {
                        guard var model = models.removeValue(forKey: id) else {
                            fits = false
                            break
                        }
                        let old = model.value(at: change.keyPath.components)
                        model.setValue(change.value, at: change.keyPath.components[...])
                        models[id] = model
                        out.append(ModelChange(model: id, keyPath: change.keyPath, oldValue: old, newValue: change.value))
                    }
                }
                if !fits {
                    for (id, original) in originals { models[id] = original }
                    state.models = models
                    return nil
                }
                state.models = models
                state.version = version
                let changeSet = ChangeSet(store: name, version: version, committedAtMicroseconds: committedAt, changes: out)
                state.history.append(changeSet, number: version)
                state.notifyingThread = pthread_self()
                return changeSet
            }
            guard let changeSet else { return nil }
            notify(changeSet)
            notified = version
            state.withLock { $0.notifyingThread = nil }
            return changeSet
        }
        guard applied != nil else { return false }
        appliedVersion.withLock { $0 = max($0, version) }
        appliedVersion.broadcast()
        return true
    }

    /// Replaces the replica's state with a snapshot of the log at `version` (on start, after a
    /// gap, or when the log went back in time), in `epoch` when given (the log's, which changes
    /// when the log was lost or the store created anew). Observers get one change set marked
    /// `isReset`, whose changes take the old models to the new ones; the history restarts at
    /// `version`.
    public func resetReplica(models newModels: [String: JSONValue], version: UInt64, epoch: String? = nil) {
        commitLock.withLock { notified in
            let changeSet: ChangeSet? = state.withLock { state in
                let newEpoch = epoch ?? state.epoch
                if state.version == version && state.models == newModels && state.epoch == newEpoch { return nil }
                state.epoch = newEpoch
                var changes: [ModelChange] = []
                for (id, old) in state.models where newModels[id] != old {
                    changes.append(ModelChange(model: id, keyPath: .whole, oldValue: old, newValue: newModels[id]))
                }
                for (id, new) in newModels where state.models[id] == nil {
                    changes.append(ModelChange(model: id, keyPath: .whole, oldValue: nil, newValue: new))
                }
                state.models = newModels
                state.version = version
                state.history.removeAll()
                state.notifyingThread = pthread_self()
                var changeSet = ChangeSet(
                    store: name, version: version, committedAtMicroseconds: Clock.microsecondsSinceEpoch(), changes: changes)
                changeSet.isReset = true
                return changeSet
            }
            guard let changeSet else { return }
            notify(changeSet)
            notified = version
            state.withLock { $0.notifyingThread = nil }
        }
        appliedVersion.withLock { $0 = version }
        appliedVersion.broadcast()
    }
}
