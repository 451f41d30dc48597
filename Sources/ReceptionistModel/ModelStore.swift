import DequeModule
import Glibc
import ReceptionistJSON
import ReceptionistSync
import Synchronization

/// A named collection of models, each a tree of JSON values, that any thread may change.
///
/// Invariants:
/// - Each commit applies all of its operations or none, and adds exactly one to `version`.
/// - Observers are called synchronously on the committing thread, in version order: commits to
///   one store, and their notifications, are serialised by the commit lock. A journaled store's
///   observers are called on its journal's thread instead, once the change set is stored, in
///   version order (`ModelStore+Journal.swift`).
/// - A snapshot's models and version always belong together (both are read under one lock), and
///   show only what is settled: a journaled store's change sets not yet stored are not read.
///
/// Any thread.
public final class ModelStore: Sendable {
    public let name: String

    struct State {
        var models = ModelSlots()
        /// The head: the version of the newest change set applied to `models`. Above the settled
        /// version (`settled`) only in a journaled store, while change sets wait for storage.
        var version: UInt64 = 0
        var history: HistoryRing<ChangeSet>
        var epoch: String
        /// Replica resets that changed anything (`resetReplica`), for what is cached by version.
        var resets: UInt64 = 0
        /// A commit's scratch: where each operation's model is (`validate`), kept between
        /// commits so that a commit allocates nothing for it.
        var located: [Int32] = []
        /// A journaled store's change sets applied to `models` but not yet stored, oldest first:
        /// the versions `settled + 1 ... version`. Always empty in any other store.
        /// A deque: the journal settles them from the front while commits append at the back.
        var unsettled: Deque<Unsettled> = []
        /// How many times the unsettled change sets were undone after storage failed: the journal
        /// drops what it still holds from before (`ModelStore+Journal.swift`).
        var generation: UInt64 = 0
        /// The store was deleted: a commit that still holds it is refused (`noSuchStore`), never
        /// applied to a store nobody can read.
        var deleted = false

        /// The version readers see: every change set up to it is settled. The oldest unsettled
        /// entry always made a version (a commit that changes nothing waits behind one, with its
        /// version, and settles with it), so it is the one after; entries are not one a version.
        var settled: UInt64 { unsettled.first.map { $0.changeSet.version - 1 } ?? version }
    }

    private struct ObserverTable {
        var entries: [ObserverEntry] = []
    }

    // Internal (not private) so that `ModelStore+Replica.swift` can reach them.
    let state: PThreadLock<State>
    /// The thread notifying observers right now (its `pthread_t`; 0 for none), so that a commit
    /// from inside an observer is refused where it would wait for the commit lock forever.
    /// Atomic, not under a lock (two lock round trips a commit): only the notifying thread writes
    /// it, its own id and then 0, and a reader only asks whether it holds the reader's own id,
    /// which no other thread ever writes; so no ordering with other memory is needed.
    private let notifyingThread = Atomic<UInt>(0)
    /// Serialises commit-and-notify, so observers see versions in order. It guards the last
    /// version whose observers have been told (a real value: a lock around `Void` has no storage
    /// for ThreadSanitizer to pair with the mutex, and is reported as a race).
    let commitLock = PThreadLock<UInt64>(0)
    private let observers = ConditionLock(ObserverTable())
    /// Where commits go when this store is a replica of a shared log; nil for a local store.
    public let replication: (any StoreReplication)?
    /// `replication != nil`, asked first by every commit: binding `replication` copies the
    /// existential (a retain and a release) even for a local store.
    private let isReplica: Bool
    /// Where a local store's change sets are stored before they settle; nil in memory.
    public let journal: (any StoreJournal)?
    /// `state.generation`, readable without the lock: the journal asks it of every record.
    let currentGeneration = Atomic<UInt64>(0)
    /// A replica's applied version, or a journaled store's settled one, for those waiting on it.
    let appliedVersion = ConditionLock<UInt64>(0)
    /// A replica's commits on this node: one at the log, the rest waiting their turn.
    let replicatedCommits = PThreadLock(ReplicatedCommitQueue(limit: ModelStore.maxWaitingReplicatedCommits))

    /// This store's life: versions count from zero again in a store created anew (a restarted
    /// gateway, a deleted and recreated store), so a version only means something with its epoch.
    /// Replicas of one cluster store share the epoch kept beside it in Redis, and take a new one
    /// with it (`resetReplica`) when the log was lost or the store created anew.
    public var epoch: String { state.withLock { $0.epoch } }

    /// - Parameter historyLimit: how many recent change sets are kept for `changes(since:)`.
    /// - Parameter historyBytes: the most bytes of them kept (`ChangeSet.approximateBytes`).
    /// - Parameter replication: makes the store a replica whose commits go through this log.
    /// - Parameter journal: makes the store durable: a change set settles once stored there.
    public init(
        name: String, historyLimit: Int = 1000, historyBytes: Int = .max, replication: (any StoreReplication)? = nil,
        epoch: String? = nil, journal: (any StoreJournal)? = nil
    ) {
        self.name = name
        self.replication = replication
        self.journal = journal
        isReplica = replication != nil
        state = PThreadLock(State(history: HistoryRing(capacity: historyLimit, maxBytes: historyBytes), epoch: epoch ?? Self.newEpoch()))
    }

    // MARK: Reading

    /// The settled version: what every read shows.
    public var version: UInt64 { state.withLock { $0.settled } }

    /// The store was deleted (`StoreRegistry.delete`): commits that still hold it are refused.
    func markDeleted() {
        state.withLock { $0.deleted = true }
    }

    /// Whether the store was deleted.
    var isDeleted: Bool { state.withLock { $0.deleted } }

    public func snapshot() -> StoreSnapshot {
        // The slots are copied under the lock (a reference each), the dictionary built outside it.
        let (models, version, unsettled, epoch, resets) = state.withLock { ($0.models, $0.settled, $0.unsettled, $0.epoch, $0.resets) }
        var dictionary = models.dictionary
        // What is not stored yet is undone, newest first: a reader never sees it.
        for entry in unsettled.reversed() { Self.undo(entry.changeSet.changes, in: &dictionary) }
        return StoreSnapshot(store: name, version: version, models: dictionary, epoch: epoch, resets: resets)
    }

    /// One model, the settled version it was read at, and the version of its last change (its
    /// entity tag), as a snapshot shows it: what journaled change sets not yet stored did to it
    /// is undone, and its tag is the one from before them. A read never waits for the disk, so a
    /// slow disk holds no job thread that other stores' reads and commits need.
    public func model(_ id: String) -> (value: JSONValue, version: UInt64, tag: UInt64)? {
        state.withLock { state in
            var value = state.models[id]
            var tag = state.models.version(of: id) ?? 0
            for entry in state.unsettled.reversed() {
                guard let prior = entry.priorTags.first(where: { $0.id == id }) else { continue }
                var one: [String: JSONValue] = [:]
                one[id] = value
                Self.undo(entry.changeSet.changes.filter { $0.model == id }, in: &one)
                value = one[id]
                tag = prior.tag
            }
            return value.map { ($0, state.settled, tag) }
        }
    }

    /// The settled models' ids: read from the slots, unless a change set is still being stored.
    public var modelIDs: [String] {
        state.withLock { $0.unsettled.isEmpty ? $0.models.modelIDs : nil } ?? Array(snapshot().models.keys)
    }

    /// How many models the store holds, at which version: what a listing shows, without building
    /// a snapshot, unless a change set is still being stored (its models are not counted yet: a
    /// failed write takes them back).
    public var modelCount: (models: Int, version: UInt64) {
        state.withLock { state in
            // The head's count, less the models the unsettled change sets made, plus those they deleted.
            var count = state.models.count
            for entry in state.unsettled {
                for change in entry.changeSet.changes where change.keyPath.count == 0 {
                    if change.oldValue == nil, change.newValue != nil { count -= 1 }
                    if change.oldValue != nil, change.newValue == nil { count += 1 }
                }
            }
            return (count, state.settled)
        }
    }

    /// The change sets after `version`, oldest first, or nil if the history no longer reaches back.
    public func changes(since version: UInt64) -> [ChangeSet]? {
        state.withLock { state in
            let (missing, changeSets) = state.history.after(version, latest: state.settled)
            return missing == nil ? changeSets : nil
        }
    }

    // MARK: Committing

    /// Applies `operations` atomically as one change set, if `condition` holds, and notifies
    /// observers before returning.
    ///
    /// A replica's or journaled store's commit waits here for the log or the disk; code that must
    /// not park a thread on it uses `commit(_:completion:)`.
    @discardableResult
    public func commit(_ operations: [StoreOperation], if condition: CommitCondition = .none) throws(StoreError) -> ChangeSet {
        try checkCommittable(operations)
        if isReplica, let replication { return try commitReplicatedWaiting(operations, condition, through: replication) }
        if journal != nil { return try commitJournaledWaiting(operations, condition) }
        return try commitLocally(operations, condition)
    }

    /// `commit` that never waits: `completion` gets the change set, or why there is none, once
    /// this node has applied it (and, journaled, stored it). A local store in memory commits and
    /// answers before returning; a replica hands the change set to the shared log and a journaled
    /// store to its journal, and each answers on the thread that hears back.
    public func commit(
        _ operations: [StoreOperation], if condition: CommitCondition = .none,
        completion: @escaping @Sendable (Result<ChangeSet, StoreError>) -> Void
    ) {
        do throws(StoreError) {
            try checkCommittable(operations)
            if isReplica, let replication { return commitReplicated(operations, condition, through: replication, completion: completion) }
            if let journal { return commitJournaled(operations, condition, journal, completion: completion) }
            completion(.success(try commitLocally(operations, condition)))
        } catch {
            completion(.failure(error))
        }
    }

    private func checkCommittable(_ operations: [StoreOperation]) throws(StoreError) {
        guard !operations.isEmpty else { throw .emptyCommit }
        guard notifyingThread.load(ordering: .relaxed) != UInt(pthread_self()) else { throw .reentrantCommit }
    }

    private func commitLocally(_ operations: [StoreOperation], _ condition: CommitCondition) throws(StoreError) -> ChangeSet {
        let result: Result<ChangeSet, StoreError> = commitLock.withLock { notified in
            let applied: Result<ChangeSet, StoreError> = state.withLock { state in
                let changes: [ModelChange]
                do throws(StoreError) {
                    if state.deleted { throw .noSuchStore(name) }
                    if !condition.isNone, let failure = condition.failure(version: state.version, modelVersion: state.models.version) {
                        throw failure
                    }
                    // Edited where it is: the lock's state is this closure's alone, so the slots
                    // stay uniquely referenced (moving them out and back retained each array).
                    changes = try Self.apply(operations, to: &state.models, located: &state.located)
                } catch {
                    return .failure(error)
                }
                // A commit that changes nothing makes no version: it is answered with the
                // current one, and nobody is notified.
                if changes.isEmpty { return .success(ChangeSet(store: name, version: state.version, committedAtMicroseconds: 0, changes: [])) }
                state.version += 1
                Self.stamp(changes, version: state.version, in: &state.models)
                let changeSet = ChangeSet(
                    store: name, version: state.version,
                    committedAtMicroseconds: Clock.microsecondsSinceEpoch(), changes: changes)
                state.history.append(changeSet, number: state.version, size: changeSet.approximateBytes)
                return .success(changeSet)
            }
            if case .success(let changeSet) = applied, !changeSet.changes.isEmpty {
                notifyObservers(changeSet)
                notified = changeSet.version
            }
            return applied
        }
        return try result.get()
    }

    /// Records `version` as the last change of every model `changes` touch (their entity tags).
    static func stamp(_ changes: [ModelChange], version: UInt64, in models: inout ModelSlots) {
        for change in changes { models.stamp(change.model, slot: change.slotHint, version: version) }
    }

    // MARK: Observing

    /// Registers `callback` for this store's changes, narrowed to one model and a key-path prefix
    /// when given. The callback runs synchronously on the committing thread, once per change set
    /// that touches what it observes, and receives only those changes.
    ///
    /// An observer added during a notification starts with the next change set.
    ///
    /// `filter` narrows further, to listed models and paths, cutting a change above a listed path
    /// down to it (`ChangeFilter`); a replica's reset reaches such an observer even when nothing of
    /// it passes.
    public func observe(
        model: String? = nil, keyPathPrefix: ModelKeyPath? = nil, filter: ChangeFilter = .all,
        options: ObservationOptions = .new, _ callback: @escaping @Sendable (ChangeSet) -> Void
    ) -> ObservationToken {
        let entry = ObserverEntry(
            model: model, keyPathPrefix: keyPathPrefix, options: options, changeFilter: filter, callback: callback)
        observers.withLock { $0.entries.append(entry) }
        return ObservationToken { [weak self] in self?.remove(entry) }
    }

    public var observerCount: Int { observers.withLock { $0.entries.count } }

    private func remove(_ entry: ObserverEntry) {
        observers.wait(until: { table in
            if !entry.cancelled {
                entry.cancelled = true
                table.entries.removeAll { $0 === entry }
            }
            // Wait out a call in progress on another thread; from inside the call, return at once.
            guard let thread = entry.callingThread else { return true }
            return pthread_equal(thread, pthread_self()) != 0
        }, then: { _ in })
    }

    /// `notify`, marked as this thread's, under the commit lock: a commit from inside is refused.
    func notifyObservers(_ changeSet: ChangeSet) {
        notifyingThread.store(UInt(pthread_self()), ordering: .relaxed)
        notify(changeSet)
        notifyingThread.store(0, ordering: .relaxed)
    }

    private func notify(_ changeSet: ChangeSet) {
        let entries = observers.withLock { $0.entries }
        for entry in entries {
            guard let filtered = entry.filter(changeSet) else { continue }
            let proceed = observers.withLock { _ in
                guard !entry.cancelled else { return false }
                entry.callingThread = pthread_self()
                return true
            }
            guard proceed else { continue }
            entry.callback(filtered)
            observers.withLock { _ in entry.callingThread = nil }
            observers.broadcast()
        }
    }

    /// 64 bits in hex: a store's or a topic's epoch (and a node's id). SplitMix64 over a counter
    /// from a random start: no two alike within a process (the mix is a bijection), processes
    /// start far apart, and it costs no system call (a cluster publish asks for one each time).
    public static func newEpoch() -> String {
        let value = epochCounter.withLock { counter -> UInt64 in
            counter &+= 0x9E37_79B9_7F4A_7C15
            var mixed = counter
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
        // Sixteen digits written in place: `String(_:radix:)` and its padding cost ten times more.
        return String(unsafeUninitializedCapacity: 16) { text in
            for index in 0..<16 {
                let digit = UInt8(truncatingIfNeeded: value >> UInt64(60 - 4 * index)) & 0xF
                text[index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") - 10 + digit
            }
            return 16
        }
    }

    private static let epochCounter = PThreadLock<UInt64>(UInt64.random(in: .min ... .max))
}
