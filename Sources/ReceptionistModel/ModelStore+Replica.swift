import Glibc
import ReceptionistJSON
import ReceptionistSync

/// A store as a replica of a shared log (see `StoreReplication`).
///
/// Invariants:
/// - A replica changes only by `applyReplicated` (exactly the next version) and `resetReplica`
///   (a whole new state); both run on one thread (the gateway's `SerialWorker`), in log order.
/// - A commit is acknowledged only once the log has taken it and this replica has applied it, so
///   a reader on this node sees its own writes, and a commit the log refused is never applied.
/// - No thread waits for the log: a commit is computed on the thread that submits it (or, when it
///   had to wait its turn or conflicted, on the thread that answered the one before), handed to
///   the log, and answered through its completion.
extension ModelStore {
    /// Commits retried after conflicting with other nodes' commits. Two nodes committing back to
    /// back to one store are not an even race: the node that won goes on from its own answer
    /// while the one that lost first catches up, so a commit can lose many times in a row. With
    /// two nodes racing 150 commits each, 3.7% of commits lost 4 times running and 0.7% 8 times,
    /// and at 16 `test_two_nodes_committing_at_once_get_every_version_exactly_once` (20 each)
    /// once saw a 503. Each attempt is a round trip to Redis, so 64 still gives up on a commit
    /// starved by a node that never stops within a fraction of a second.
    static let maxReplicatedAttempts = 64
    /// Commits of one store that may wait on one node behind the one at the log.
    public static let maxWaitingReplicatedCommits = 1024
    /// How long the blocking `commit` waits for a replicated commit's answer. The log answers
    /// every commit within its own time-out; this only guards against one that never does.
    static let replicatedCommitWaitSeconds = 120.0

    /// The blocking `commit` of a replica: parks the calling thread until the log answers. Only
    /// for callers that have nothing else to do (start-up, tests); the gateway uses
    /// `commit(_:completion:)`.
    func commitReplicatedWaiting(
        _ operations: [StoreOperation], _ condition: CommitCondition, through replication: any StoreReplication
    ) throws(StoreError) -> ChangeSet {
        let slot = ConditionLock<Result<ChangeSet, StoreError>?>(nil)
        commitReplicated(operations, condition, through: replication) { result in
            slot.withLock { $0 = result }
            slot.broadcast()
        }
        let result = slot.wait(seconds: Self.replicatedCommitWaitSeconds, until: { $0 != nil }, then: { value, _ in value })
        return try (result ?? .failure(.outcomeUnknown("the cluster did not answer in time"))).get()
    }

    /// Queues a commit for the log; `completion` gets its change set or why it failed.
    func commitReplicated(
        _ operations: [StoreOperation], _ condition: CommitCondition, through replication: any StoreReplication,
        completion: @escaping @Sendable (Result<ChangeSet, StoreError>) -> Void
    ) {
        let admission = replicatedCommits.withLock {
            $0.submit(.init(operations: operations, condition: condition, completion: completion))
        }
        switch admission {
        case .start(let pending): run(pending, through: replication)
        case .queued: break
        case .refused:
            completion(.failure(.unavailable(
                "\(Self.maxWaitingReplicatedCommits) commits to this store already wait on this node; retry")))
        }
    }

    /// Sends commits to the log one after another for as long as each is answered at once (a
    /// refusal, a bad operation); one answered later carries on from its completion. A loop, not
    /// recursion, so a queue of commits refused at once never deepens the stack.
    private func run(_ first: ReplicatedCommitQueue.Pending, through replication: any StoreReplication) {
        var next: ReplicatedCommitQueue.Pending? = first
        while let pending = next {
            next = send(pending, through: replication)
        }
    }

    /// Computes `pending` against the replica and hands it to the log. Returns what to send next
    /// when the answer came before `commit` returned; nil when it will come later (or nothing waits).
    private func send(_ pending: ReplicatedCommitQueue.Pending, through replication: any StoreReplication)
        -> ReplicatedCommitQueue.Pending?
    {
        var attempt = pending
        attempt.attempts += 1
        let pending = attempt
        let computed: Result<(UInt64, String, [ModelChange], [String: JSONValue?]), StoreError> = state.withLock { state in
            // Only the touched models are copied and edited; the replica is unchanged.
            var touched = ModelSlots()
            for operation in pending.operations {
                if let value = state.models[operation.model] { touched.updateValue(value, forKey: operation.model) }
            }
            do throws(StoreError) {
                // Checked against the replica at the version the log must still be at for the
                // script to append: the check and the append are one atomic step in the log.
                if !pending.condition.isNone,
                   let failure = pending.condition.failure(version: state.version, modelVersion: state.models.version)
                {
                    throw failure
                }
                let changes = try Self.apply(pending.operations, to: &touched, located: &state.located)
                var after: [String: JSONValue?] = [:]
                for operation in pending.operations { after[operation.model] = .some(touched[operation.model]) }
                return .success((state.version, state.epoch, changes, after))
            } catch {
                return .failure(error)
            }
        }
        let base: UInt64, epoch: String, changes: [ModelChange], models: [String: JSONValue?]
        switch computed {
        case .success(let value): (base, epoch, changes, models) = value
        case .failure(let error): return finish(pending, .failure(error))
        }
        let candidate = ChangeSet(
            store: name, version: base + 1, committedAtMicroseconds: Clock.microsecondsSinceEpoch(), changes: changes)
        // The answer may come on this thread before `commit` returns (then it is handled by the
        // loop in `run`) or on another thread later (then it is handled there).
        let answer = PThreadLock<(returned: Bool, outcome: ReplicationOutcome?)>((false, nil))
        replication.commit(candidate, models: models, expectedVersion: base, epoch: epoch) { [self] outcome in
            let later = answer.withLock { answer -> Bool in
                if answer.returned { return true }
                answer.outcome = outcome
                return false
            }
            guard later else { return }
            if let next = handle(outcome, of: pending, candidate: candidate, base: base) { run(next, through: replication) }
        }
        let early = answer.withLock { answer -> ReplicationOutcome? in
            answer.returned = true
            return answer.outcome
        }
        guard let early else { return nil }
        return handle(early, of: pending, candidate: candidate, base: base)
    }

    /// What the log said to `pending`: answers it (returning the next commit to send) or, after a
    /// conflict, returns it to be computed again against the replica, which has caught up.
    private func handle(
        _ outcome: ReplicationOutcome, of pending: ReplicatedCommitQueue.Pending, candidate: ChangeSet, base: UInt64
    ) -> ReplicatedCommitQueue.Pending? {
        switch outcome {
        case .committed(let version):
            return finish(pending, .success(ChangeSet(
                store: name, version: version, committedAtMicroseconds: candidate.committedAtMicroseconds,
                changes: candidate.changes)))
        case .conflict(let current) where current < base:
            // The log is behind this replica: it was lost and started again. The replica is
            // re-read from it (the engine sees the same answer); the caller may retry then.
            return finish(pending, .failure(.unavailable(
                "the store's log in Redis is behind this node (Redis lost data); it is being re-read; retry")))
        case .conflict:
            // Another node committed first, and the replica has caught up with it: recompute.
            guard pending.attempts < Self.maxReplicatedAttempts else {
                return finish(pending, .failure(.unavailable("too many conflicting commits from other nodes; retry")))
            }
            return pending
        case .failed(let error):
            return finish(pending, .failure(error))
        }
    }

    /// Answers `pending` and takes the next commit off the queue.
    private func finish(_ pending: ReplicatedCommitQueue.Pending, _ result: Result<ChangeSet, StoreError>)
        -> ReplicatedCommitQueue.Pending?
    {
        pending.completion(result)
        return replicatedCommits.withLock { $0.finished() }
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
                // Edited in place (the lock's state is this closure's alone); what was touched
                // is kept to be put back if the change set does not fit.
                var originals: [String: JSONValue?] = [:]
                var out: [ModelChange] = []
                out.reserveCapacity(changes.count)
                var fits = true
                for change in changes {
                    let id = change.model
                    if originals[id] == nil { originals[id] = .some(state.models[id]) }
                    if change.keyPath.count == 0 {
                        let old: JSONValue?
                        if let value = change.value {
                            old = state.models.updateValue(value, forKey: id)
                        } else {
                            old = state.models.removeValue(forKey: id)
                        }
                        out.append(ModelChange(model: id, keyPath: .whole, oldValue: old, newValue: change.value))
                    } else {
                        guard state.models[id] != nil else {
                            fits = false
                            break
                        }
                        var old: JSONValue?
                        state.models.modify(id) { model in
                            old = change.keyPath.withComponents { model.replaceValue(change.value, along: $0) }
                        }
                        out.append(ModelChange(model: id, keyPath: change.keyPath, oldValue: old, newValue: change.value))
                    }
                }
                if !fits {
                    for (id, original) in originals {
                        if let original { state.models.updateValue(original, forKey: id) } else { state.models.removeValue(forKey: id) }
                    }
                    return nil
                }
                state.version = version
                Self.stamp(out, version: version, in: &state.models)
                var changeSet = ChangeSet(store: name, version: version, committedAtMicroseconds: committedAt, changes: out)
                changeSet.epoch = state.epoch
                state.history.append(changeSet, number: version, size: changeSet.approximateBytes)
                return changeSet
            }
            guard let changeSet else { return nil }
            notifyObservers(changeSet)
            notified = version
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
                let oldModels = state.models.dictionary
                if state.version == version && oldModels == newModels && state.epoch == newEpoch { return nil }
                state.epoch = newEpoch
                state.resets &+= 1
                var changes: [ModelChange] = []
                for (id, old) in oldModels where newModels[id] != old {
                    changes.append(ModelChange(model: id, keyPath: .whole, oldValue: old, newValue: newModels[id]))
                }
                for (id, new) in newModels where oldModels[id] == nil {
                    changes.append(ModelChange(model: id, keyPath: .whole, oldValue: nil, newValue: new))
                }
                state.models = ModelSlots(newModels, version: version)
                state.version = version
                state.history.removeAll()
                var changeSet = ChangeSet(
                    store: name, version: version, committedAtMicroseconds: Clock.microsecondsSinceEpoch(), changes: changes)
                changeSet.isReset = true
                changeSet.epoch = newEpoch
                return changeSet
            }
            guard let changeSet else { return }
            notifyObservers(changeSet)
            notified = version
        }
        appliedVersion.withLock { $0 = version }
        appliedVersion.broadcast()
    }
}
