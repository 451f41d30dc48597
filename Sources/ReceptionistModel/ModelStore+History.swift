import DequeModule
import ReceptionistJSON

/// Reads of a store's past, from the change sets it keeps (`historyLimit` of them): the store as
/// it was at a version, and the change sets between two versions. Every change set carries the
/// values before it, so a past state is the present one with the later change sets undone.
extension ModelStore {
    /// The store exactly as it was at `version`: the settled snapshot with every later change set
    /// undone, newest first. `gone` when the history no longer reaches back to it (naming the
    /// oldest version that can be read), `invalidRead` for a version not reached yet.
    ///
    /// `older` may hold change sets from a shared log (the cluster's, in Redis) that reach back
    /// further than this store's history: those that close the gap below it are used.
    public func snapshot(at version: UInt64, older: [ChangeSet] = []) -> Result<StoreSnapshot, StoreError> {
        // One read under the lock: the slots (a reference each), what has not settled, and the
        // settled change sets after `version`; the dictionary is built and undone outside it.
        let read: Result<(ModelSlots, Deque<Unsettled>, [ChangeSet]), StoreError> = state.withLock { state in
            let settled = state.settled
            guard version <= settled else {
                return .failure(.invalidRead("version \(version) is ahead of the store, which is at \(settled)"))
            }
            guard let later = Self.after(version, in: state, older: older) else { return .failure(Self.gone(version, state)) }
            return .success((state.models, state.unsettled, later))
        }
        switch read {
        case .failure(let error):
            return .failure(error)
        case .success(let (slots, unsettled, later)):
            var models = slots.dictionary
            for entry in unsettled.reversed() { Self.undo(entry.changeSet.changes, in: &models) }
            for changeSet in later.reversed() { Self.undo(changeSet.changes, in: &models) }
            return .success(StoreSnapshot(store: name, version: version, models: models))
        }
    }

    /// The change sets after `after` up to `until` (or the newest), oldest first, at most `limit`.
    /// `gone` when the history no longer reaches back to `after + 1`.
    /// `older` as for `snapshot(at:older:)`.
    public func changes(after: UInt64, until: UInt64? = nil, limit: Int, older: [ChangeSet] = []) -> Result<[ChangeSet], StoreError> {
        state.withLock { state in
            let settled = state.settled
            guard after <= settled else {
                return .failure(.invalidRead("version \(after) is ahead of the store, which is at \(settled)"))
            }
            guard let later = Self.after(after, in: state, older: older) else { return .failure(Self.gone(after, state)) }
            let last = min(until ?? settled, settled)
            return .success(Array(later.lazy.prefix { $0.version <= last }.prefix(max(0, limit))))
        }
    }

    /// The settled change sets after `version`, oldest first, from the history and, below it,
    /// from `older` when they close the gap exactly; nil when neither reaches back.
    private static func after(_ version: UInt64, in state: State, older: [ChangeSet]) -> [ChangeSet]? {
        let (missing, later) = state.history.after(version, latest: state.settled)
        guard let missing else { return later }
        let filling = older.filter { missing.contains($0.version) }
        guard filling.count == missing.count, filling.first?.version == missing.lowerBound,
              zip(filling, filling.dropFirst()).allSatisfy({ $0.version + 1 == $1.version })
        else { return nil }
        return filling + later
    }

    /// The version below which this store's own history does not reach: reading after it needs
    /// the shared log (or is gone).
    public var historyFloor: UInt64 {
        state.withLock { state in state.history.oldestNumber.map { $0 - 1 } ?? state.settled }
    }

    /// The oldest version that can still be read: one below the oldest change set kept.
    private static func gone(_ version: UInt64, _ state: State) -> StoreError {
        let oldest = state.history.oldestNumber.map { $0 - 1 } ?? state.settled
        return .gone("version \(version) is older than the history kept (the oldest readable is \(oldest))", oldest: oldest)
    }
}
