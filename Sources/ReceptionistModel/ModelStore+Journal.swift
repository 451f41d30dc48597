import ReceptionistJSON
import ReceptionistSync

/// A store whose change sets are stored by a journal before anyone sees them (see `StoreJournal`).
///
/// Invariants:
/// - A commit is applied to the models at once (the head), handed to the journal under the
///   commit lock (so the journal gets each store's change sets in version order), and settles
///   (history, observers, the committer's answer) only once stored.
/// - Readers see the settled version: `snapshot` undoes what has not settled; `model` waits for it.
/// - If the journal cannot store a change set, every unsettled one is undone, newest first, their
///   committers are answered with the error, and the generation moves on so the journal drops the
///   records it still holds of them.
extension ModelStore {
    /// How long a blocking journaled commit waits for its answer. The journal answers every
    /// record; this only guards against one that never does.
    static let journaledCommitWaitSeconds = 120.0

    func commitJournaledWaiting(_ operations: [StoreOperation], _ condition: CommitCondition) throws(StoreError) -> ChangeSet {
        let slot = ConditionLock<Result<ChangeSet, StoreError>?>(nil)
        guard let journal else { throw .unavailable("the store has no journal") }
        commitJournaled(operations, condition, journal) { result in
            slot.withLock { $0 = result }
            slot.broadcast()
        }
        let result = slot.wait(seconds: Self.journaledCommitWaitSeconds, until: { $0 != nil }, then: { value, _ in value })
        return try (result ?? .failure(.outcomeUnknown("the journal did not answer in time"))).get()
    }

    func commitJournaled(
        _ operations: [StoreOperation], _ condition: CommitCondition, _ journal: any StoreJournal,
        completion: @escaping @Sendable (Result<ChangeSet, StoreError>) -> Void
    ) {
        // A commit that changed nothing, with nothing before it waiting for the disk.
        var answerNow: ChangeSet?
        let failure: StoreError? = commitLock.withLock { _ in
            let record: Result<JournalRecord?, StoreError> = state.withLock { state in
                let changes: [ModelChange]
                var deleted: [(id: String, tag: UInt64)] = []
                do throws(StoreError) {
                    if state.deleted { throw .noSuchStore(name) }
                    if !condition.isNone, let failure = condition.failure(version: state.version, modelVersion: state.models.version) {
                        throw failure
                    }
                    // The tags of the models it deletes, while their slots are there.
                    for operation in operations where operation.kind == .delete {
                        deleted.append((operation.model, state.models.version(of: operation.model) ?? 0))
                    }
                    changes = try Self.apply(operations, to: &state.models, located: &state.located)
                } catch {
                    // A condition that no longer holds names the head's version: the refusal
                    // waits behind the change sets still being stored, as a commit that changes
                    // nothing does, so it never names a version that a failed write then undoes.
                    guard case .preconditionFailed = error, !state.unsettled.isEmpty else { return .failure(error) }
                    state.waitBehindUnsettled(store: name) { result in completion(result.flatMap { _ in .failure(error) }) }
                    return .success(nil)
                }
                // A commit that changes nothing makes no version and stores nothing. It is
                // answered with the current version once that is stored: at once, or when the
                // change sets before it settle.
                if changes.isEmpty {
                    if state.unsettled.isEmpty {
                        answerNow = ChangeSet(store: name, version: state.version, committedAtMicroseconds: 0, changes: [])
                    } else {
                        state.waitBehindUnsettled(store: name, completion)
                    }
                    return .success(nil)
                }
                state.version += 1
                let priorTags = state.models.stamp(changes, version: state.version, deleted: deleted)
                let changeSet = ChangeSet(
                    store: name, version: state.version, committedAtMicroseconds: Clock.microsecondsSinceEpoch(), changes: changes)
                state.unsettled.append(Unsettled(
                    changeSet: changeSet, priorTags: priorTags, completion: completion))
                return .success(JournalRecord(changeSet: changeSet, generation: state.generation))
            }
            switch record {
            case .success(let record?):
                // Under the commit lock: the journal takes this store's records in version order.
                journal.append(record, of: self)
                return nil
            case .success(nil):
                return nil
            case .failure(let error):
                return error
            }
        }
        if let failure { completion(.failure(failure)) }
        if let answerNow { completion(.success(answerNow)) }
    }

    /// The models changed after `version`, as they are now (the head, settled or not), with the
    /// version and generation they are at: what a journal writes as its next snapshot of the
    /// models once it has stored every change set up to that version. Any thread.
    public func journalSnapshot(changedAfter version: UInt64) -> JournalSnapshot {
        state.withLock { state in
            JournalSnapshot(version: state.version, generation: state.generation, models: state.models.changed(after: version))
        }
    }

    /// The journal stored every change set up to `version` of `generation`: they settle, in
    /// order. Called on the journal's thread, in version order; never inside a lock of this store.
    public func settle(through version: UInt64, generation: UInt64) {
        let settled: [Unsettled] = state.withLock { state in
            guard state.generation == generation else { return [] }
            var count = 0
            while count < state.unsettled.count, state.unsettled[count].changeSet.version <= version { count += 1 }
            let settled = Array(state.unsettled.prefix(count))
            state.unsettled.removeFirst(count)  // a deque: no shift of what stays
            for entry in settled where !entry.changeSet.changes.isEmpty {
                state.history.append(entry.changeSet, number: entry.changeSet.version, size: entry.changeSet.approximateBytes)
            }
            return settled
        }
        guard let last = settled.last else { return }
        for entry in settled where !entry.changeSet.changes.isEmpty { notifyObservers(entry.changeSet) }
        appliedVersion.withLock { $0 = max($0, last.changeSet.version) }
        appliedVersion.broadcast()
        for entry in settled { entry.completion?(.success(entry.changeSet)) }
    }

    /// The journal could not store a change set of `generation`: every unsettled one is undone.
    /// Called on the journal's thread; never inside a lock of this store.
    public func unsettle(generation: UInt64, because error: StoreError) {
        let undone: [Unsettled] = state.withLock { state in
            guard state.generation == generation, !state.unsettled.isEmpty else { return [] }
            for entry in state.unsettled.reversed() {
                Self.undo(entry.changeSet.changes, in: &state.models)
                for (id, tag) in entry.priorTags { state.models.stamp(id, slot: -1, version: tag) }
            }
            state.version = state.settled
            let undone = Array(state.unsettled)
            state.unsettled = []
            state.generation += 1
            currentGeneration.store(state.generation, ordering: .relaxed)
            return undone
        }
        for entry in undone { entry.completion?(.failure(error)) }
    }

    /// Whether the journal still wants `generation`'s records of this store. Without the lock: a
    /// record read as current just before an undo is still dropped by `settle`, which checks the
    /// generation under the lock, and its write is undone with the rest.
    public func isCurrent(generation: UInt64) -> Bool {
        currentGeneration.load(ordering: .relaxed) == generation
    }

    /// Takes the state a journal stored: the models with their tags, the version, and the newest
    /// change sets (oldest first) for the history. For a store just made, before anyone observes it.
    public func restore(models: [(id: String, value: JSONValue, tag: UInt64)], version: UInt64, history: [ChangeSet]) {
        state.withLock { state in
            var slots = ModelSlots()
            slots.reserveCapacity(models.count)
            for model in models { slots.updateValue(model.value, forKey: model.id, version: model.tag) }
            state.models = slots
            state.version = version
            state.history.removeAll()
            for changeSet in history where changeSet.version <= version {
                state.history.append(changeSet, number: changeSet.version, size: changeSet.approximateBytes)
            }
        }
        appliedVersion.withLock { $0 = version }
    }

    /// Takes `changes` back, newest first, in `models`.
    static func undo(_ changes: [ModelChange], in models: inout ModelSlots) {
        for change in changes.reversed() {
            if change.keyPath.count == 0 {
                if let old = change.oldValue { models.updateValue(old, forKey: change.model) } else {
                    models.removeValue(forKey: change.model)
                }
            } else {
                models.modify(change.model) { model in
                    _ = change.keyPath.withComponents { model.replaceValue(change.oldValue, along: $0) }
                }
            }
        }
    }

    /// Takes `changes` back, newest first, in a snapshot's models.
    static func undo(_ changes: [ModelChange], in models: inout [String: JSONValue]) {
        for change in changes.reversed() {
            if change.keyPath.count == 0 {
                models[change.model] = change.oldValue
            } else if models[change.model] != nil {
                _ = change.keyPath.withComponents { models[change.model]!.replaceValue(change.oldValue, along: $0) }
            }
        }
    }
}

extension ModelStore.State {
    /// Answers `completion` with the current version, which makes none of its own, once the
    /// change sets before it settle (with them: undone, it gets their error).
    mutating func waitBehindUnsettled(
        store name: String, _ completion: @escaping @Sendable (Result<ChangeSet, StoreError>) -> Void
    ) {
        let current = ChangeSet(store: name, version: version, committedAtMicroseconds: 0, changes: [])
        unsettled.append(Unsettled(changeSet: current, priorTags: [], completion: completion))
    }
}
