import Glibc
import ReceptionistJSON
import ReceptionistSync
import Synchronization

/// A named collection of models, each a tree of JSON values, that any thread may change.
///
/// Invariants:
/// - Each commit applies all of its operations or none, and adds exactly one to `version`.
/// - Observers are called synchronously on the committing thread, in version order: commits to
///   one store, and their notifications, are serialised by the commit lock.
/// - A snapshot's models and version always belong together (both are read under one lock).
///
/// Any thread.
public final class ModelStore: Sendable {
    public let name: String

    struct State {
        var models = ModelSlots()
        var version: UInt64 = 0
        var history: HistoryRing<ChangeSet>
        var epoch: String
        /// A commit's scratch: where each operation's model is (`validate`), kept between
        /// commits so that a commit allocates nothing for it.
        var located: [Int32] = []
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
    /// A replica's applied version, for committers waiting to see their own change set.
    let appliedVersion = ConditionLock<UInt64>(0)
    /// A replica's commits on this node: one at the log, the rest waiting their turn.
    let replicatedCommits = PThreadLock(ReplicatedCommitQueue(limit: ModelStore.maxWaitingReplicatedCommits))

    /// - Parameter historyLimit: how many recent change sets are kept for `changes(since:)`.
    /// This store's life: versions count from zero again in a store created anew (a restarted
    /// gateway, a deleted and recreated store), so a version only means something with its epoch.
    /// Replicas of one cluster store share the epoch kept beside it in Redis, and take a new one
    /// with it (`resetReplica`) when the log was lost or the store created anew.
    public var epoch: String { state.withLock { $0.epoch } }

    /// - Parameter replication: makes the store a replica whose commits go through this log.
    public init(name: String, historyLimit: Int = 1000, replication: (any StoreReplication)? = nil, epoch: String? = nil) {
        self.name = name
        self.replication = replication
        isReplica = replication != nil
        state = PThreadLock(State(history: HistoryRing(capacity: historyLimit), epoch: epoch ?? Self.newEpoch()))
    }

    // MARK: Reading

    public var version: UInt64 { state.withLock { $0.version } }

    public func snapshot() -> StoreSnapshot {
        // The slots are copied under the lock (a reference each), the dictionary built outside it.
        let (models, version) = state.withLock { ($0.models, $0.version) }
        return StoreSnapshot(store: name, version: version, models: models.dictionary)
    }

    /// One model and the version it was read at.
    public func model(_ id: String) -> (value: JSONValue, version: UInt64)? {
        state.withLock { state in state.models[id].map { ($0, state.version) } }
    }

    public var modelIDs: [String] { state.withLock { $0.models.modelIDs } }

    /// How many models the store holds, at which version: what a listing shows, without building
    /// a snapshot.
    public var modelCount: (models: Int, version: UInt64) { state.withLock { ($0.models.count, $0.version) } }

    /// The change sets after `version`, oldest first, or nil if the history no longer reaches back.
    public func changes(since version: UInt64) -> [ChangeSet]? {
        state.withLock { state in
            let (missing, changeSets) = state.history.after(version, latest: state.version)
            return missing == nil ? changeSets : nil
        }
    }

    // MARK: Committing

    /// Applies `operations` atomically as one change set and notifies observers before returning.
    ///
    /// A replica's commit waits here for the shared log; code that must not park a thread on it
    /// uses `commit(_:completion:)`.
    @discardableResult
    public func commit(_ operations: [StoreOperation]) throws(StoreError) -> ChangeSet {
        try checkCommittable(operations)
        if isReplica, let replication { return try commitReplicatedWaiting(operations, through: replication) }
        return try commitLocally(operations)
    }

    /// `commit` that never waits: `completion` gets the change set, or why there is none, once
    /// this node has applied it. A local store commits and answers before returning; a replica
    /// hands the change set to the shared log and answers on the thread that hears back.
    public func commit(
        _ operations: [StoreOperation], completion: @escaping @Sendable (Result<ChangeSet, StoreError>) -> Void
    ) {
        do throws(StoreError) {
            try checkCommittable(operations)
            guard isReplica, let replication else { return completion(.success(try commitLocally(operations))) }
            commitReplicated(operations, through: replication, completion: completion)
        } catch {
            completion(.failure(error))
        }
    }

    private func checkCommittable(_ operations: [StoreOperation]) throws(StoreError) {
        guard !operations.isEmpty else { throw .emptyCommit }
        guard notifyingThread.load(ordering: .relaxed) != UInt(pthread_self()) else { throw .reentrantCommit }
    }

    private func commitLocally(_ operations: [StoreOperation]) throws(StoreError) -> ChangeSet {
        let result: Result<ChangeSet, StoreError> = commitLock.withLock { notified in
            let applied: Result<ChangeSet, StoreError> = state.withLock { state in
                let changes: [ModelChange]
                do throws(StoreError) {
                    // Edited where it is: the lock's state is this closure's alone, so the slots
                    // stay uniquely referenced (moving them out and back retained each array).
                    changes = try Self.apply(operations, to: &state.models, located: &state.located)
                } catch {
                    return .failure(error)
                }
                state.version += 1
                let changeSet = ChangeSet(
                    store: name, version: state.version,
                    committedAtMicroseconds: Clock.microsecondsSinceEpoch(), changes: changes)
                state.history.append(changeSet, number: state.version)
                return .success(changeSet)
            }
            if case .success(let changeSet) = applied {
                notifyObservers(changeSet)
                notified = changeSet.version
            }
            return applied
        }
        return try result.get()
    }

    /// Applies every operation or, on the first failure, none, and throws.
    ///
    /// What can fail (a bad id, a value that is not an object, a model that does not exist at
    /// that point of the commit) is found by a first pass that changes nothing, so the second
    /// pass cannot fail and keeps no copy of any model for a rollback. Each model is then reached
    /// with one lookup per operation and edited in place, in its slot: never copied out and back.
    ///
    /// `located` is scratch space the caller keeps between commits (its contents are not read).
    static func apply(
        _ operations: [StoreOperation], to models: inout ModelSlots, located: inout [Int32]
    ) throws(StoreError) -> [ModelChange] {
        // Where each operation's model is, when the commit only edits models in place (no put
        // or delete moves them): then no model is hashed twice.
        let inPlace = try validate(operations, against: models, located: &located)
        defer {
            // A commit far larger than most keeps no memory past its end.
            if located.count > 4_096 { located = [] }
        }
        var changes: [ModelChange] = []
        changes.reserveCapacity(operations.count)
        // Through the buffer, as in `validate`: no operation is copied out of the array.
        operations.withUnsafeBufferPointer { operations in
            guard let base = operations.baseAddress else { return }
            for position in operations.indices {
                apply(base + position, at: inPlace ? Int(located[position]) : nil, to: &models, changes: &changes)
            }
        }
        return changes
    }

    /// Applies one operation that `validate` passed; `located` is its model's index, if known.
    /// The operation is read through its pointer, field by field, never copied whole.
    ///
    /// Changes are built with `ModelChange`'s memberwise initialiser inside the `append` (see
    /// `ModelChange`): built elsewhere and appended, each was copied and destroyed once more.
    private static func apply(
        _ operation: UnsafePointer<StoreOperation>, at located: Int?,
        to models: inout ModelSlots, changes: inout [ModelChange]
    ) {
        let id = operation.pointee.model
        switch operation.pointee.kind {
        case .put:
            // `validate` passed it: a put's value is an object.
            guard let value = operation.pointee.value else { return }
            let old = models.updateValue(value, forKey: id)
            changes.append(ModelChange(
                model: id, keyPath: .whole, kind: ModelChange.kind(old: old, new: value), oldValue: old, newValue: value))
        case .patch:
            guard let patch = operation.pointee.value else { return }
            func patched(_ model: inout JSONValue) {
                let before = model
                for effect in model.applyMergePatch(patch) {
                    let old = before.value(at: effect.path)
                    changes.append(ModelChange(
                        model: id, keyPath: ModelKeyPath(effect.path), kind: ModelChange.kind(old: old, new: effect.value),
                        oldValue: old, newValue: effect.value))
                }
            }
            if let located { patched(&models.values[located]!) } else { models.modify(id, patched) }
        case .set:
            if let located {
                set(
                    operation.pointee.value, at: operation.pointee.keyPath, in: &models.values[located]!, of: id,
                    slot: Int32(truncatingIfNeeded: located), changes: &changes)
            } else {
                models.modify(id) {
                    set(operation.pointee.value, at: operation.pointee.keyPath, in: &$0, of: id, slot: -1, changes: &changes)
                }
            }
        case .delete:
            let old = models.removeValue(forKey: id)
            changes.append(ModelChange(model: id, keyPath: .whole, kind: .deleted, oldValue: old, newValue: nil))
        }
    }

    /// Sets (or with nil removes) `value` at `keyPath` in `model`, in place, and appends the change.
    ///
    /// `value` and `keyPath` are the caller's copies, taken (`consuming`) and moved into the
    /// change: borrowed, each was copied once more for the change and the argument released after
    /// it, a retain and release of the key path (atomic) for every change a job sets.
    private static func set(
        _ value: consuming JSONValue?, at keyPath: consuming ModelKeyPath, in model: inout JSONValue, of id: String,
        slot: Int32, changes: inout [ModelChange]
    ) {
        // A set that must create (or turn into an object) an ancestor of its path is reported at
        // that ancestor, so that a change with no old value always means its parent was there,
        // and a receiver can undo or fold it exactly.
        if value != nil, keyPath.count > 1, let depth = Self.firstReshaped(model, keyPath.components) {
            let ancestor = Array(keyPath.components[..<depth])
            let before = model.value(at: ancestor)
            model.setValue(value, at: keyPath.components[...])
            changes.append(ModelChange(
                model: id, keyPath: ModelKeyPath(ancestor), oldValue: before, newValue: model.value(at: ancestor)))
            return
        }
        let old = keyPath.withComponents { model.replaceValue(value, along: $0) }
        let kind = ModelChange.kind(old: old, new: value)
        changes.append(ModelChange(
            model: id, keyPath: keyPath, kind: kind, slotHint: slot, oldValue: old, newValue: value))
    }

    /// Throws what `apply` would fail on, in the order it would meet it, changing nothing. Models
    /// put or deleted earlier in the same commit count as they will be by then.
    ///
    /// Returns whether `located` holds each operation's model's slot in `models`, by position
    /// (it grows to one per operation, and is only ever written): it does when every operation
    /// edits a model in place (`set` and `patch`), since the slots then stay as they are while
    /// `apply` runs.
    static func validate(
        _ operations: [StoreOperation], against models: ModelSlots, located: inout [Int32]
    ) throws(StoreError) -> Bool {
        var existsNow: [String: Bool] = [:]
        var inPlace = true
        // Grown, never emptied: clearing an array runs the general `replaceSubrange`.
        if located.count < operations.count {
            located.append(contentsOf: repeatElement(0, count: operations.count - located.count))
        }
        // Through the buffer: each operation is read in place, not copied out of the array
        // (a copy retains and releases every field of it).
        // `located` through its buffer too: written by subscript, it was checked for a unique
        // reference on every operation.
        try located.withUnsafeMutableBufferPointer { slots throws(StoreError) in
            try operations.withUnsafeBufferPointer { operations throws(StoreError) in
                guard let base = operations.baseAddress else { return }
                for position in operations.indices {
                    let operation = base + position
                    let exists: Bool
                    if existsNow.isEmpty, let slot = models.slot(of: operation.pointee.model) {
                        // A model in the store has a valid id: it was checked when it was put.
                        exists = true
                        slots[position] = Int32(truncatingIfNeeded: slot)
                    } else {
                        let id = operation.pointee.model
                        guard Self.isValidModelID(id) else { throw StoreError.invalidModelID(id) }
                        exists = existsNow[id] ?? (models[id] != nil)
                    }
                    try check(operation, exists: exists, existsNow: &existsNow, inPlace: &inPlace)
                }
            }
        }
        return inPlace
    }

    /// `validate`'s check of one operation, whose model does or does not exist at that point.
    @inline(__always)
    private static func check(
        _ operation: UnsafePointer<StoreOperation>, exists: Bool, existsNow: inout [String: Bool],
        inPlace: inout Bool
    ) throws(StoreError) {
        switch operation.pointee.kind {
        case .put:
            guard operation.pointee.value?.objectValue != nil else { throw StoreError.notAnObject("a model") }
            existsNow[operation.pointee.model] = true
            inPlace = false
        case .patch:
            guard operation.pointee.value?.objectValue != nil else { throw StoreError.notAnObject("a merge patch") }
            guard exists else { throw StoreError.noSuchModel(operation.pointee.model) }
        case .set:
            guard exists else { throw StoreError.noSuchModel(operation.pointee.model) }
            if operation.pointee.keyPath.count == 0, operation.pointee.value?.objectValue == nil {
                throw StoreError.notAnObject("a model")
            }
        case .delete:
            guard exists else { throw StoreError.noSuchModel(operation.pointee.model) }
            existsNow[operation.pointee.model] = false
            inPlace = false
        }
    }

    /// The length of the shortest proper prefix of `path` at which `model` holds no object (a
    /// setter creates or replaces it there), or nil if every ancestor of `path` is an object.
    static func firstReshaped(_ model: JSONValue, _ path: [String]) -> Int? {
        var current = model
        for depth in 0..<(path.count - 1) {
            guard case .object(let members) = current, let next = members[path[depth]], case .object = next else {
                return depth == 0 && current.objectValue == nil ? 0 : depth + 1
            }
            current = next
        }
        return nil
    }

    /// A model id is 1 to 128 bytes of UTF-8 with no `/` and no control character.
    static func isValidModelID(_ id: String) -> Bool {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= 128 else { return false }
        for byte in bytes where byte < 0x20 || byte == UInt8(ascii: "/") {
            return false
        }
        return true
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
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    private static let epochCounter = PThreadLock<UInt64>(UInt64.random(in: .min ... .max))
}
