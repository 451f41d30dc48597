import Glibc
import ReceptionistJSON
import ReceptionistSync

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
        var models: [String: JSONValue] = [:]
        var version: UInt64 = 0
        var history: HistoryRing<ChangeSet>
        /// The thread notifying observers right now, to refuse a commit from inside an observer.
        var notifyingThread: pthread_t?
    }

    private struct ObserverTable {
        var entries: [ObserverEntry] = []
    }

    // Internal (not private) so that `ModelStore+Replica.swift` can reach them.
    let state: PThreadLock<State>
    /// Serialises commit-and-notify, so observers see versions in order. It guards the last
    /// version whose observers have been told (a real value: a lock around `Void` has no storage
    /// for ThreadSanitizer to pair with the mutex, and is reported as a race).
    let commitLock = PThreadLock<UInt64>(0)
    private let observers = ConditionLock(ObserverTable())
    /// Where commits go when this store is a replica of a shared log; nil for a local store.
    public let replication: (any StoreReplication)?
    /// A replica's applied version, for committers waiting to see their own change set.
    let appliedVersion = ConditionLock<UInt64>(0)
    /// One replicated commit in flight per store on this node, so this node's commits never
    /// conflict with each other, only with other nodes'.
    let replicatedCommitLock = PThreadLock<UInt64>(0)

    /// - Parameter historyLimit: how many recent change sets are kept for `changes(since:)`.
    /// This store's life: versions count from zero again in a store created anew (a restarted
    /// gateway, a deleted and recreated store), so a version only means something with its epoch.
    /// Replicas of one cluster store share the epoch kept beside it in Redis.
    public let epoch: String

    /// - Parameter replication: makes the store a replica whose commits go through this log.
    public init(name: String, historyLimit: Int = 1000, replication: (any StoreReplication)? = nil, epoch: String? = nil) {
        self.name = name
        self.replication = replication
        self.epoch = epoch ?? Self.newEpoch()
        state = PThreadLock(State(history: HistoryRing(capacity: historyLimit)))
    }

    // MARK: Reading

    public var version: UInt64 { state.withLock { $0.version } }

    public func snapshot() -> StoreSnapshot {
        state.withLock { StoreSnapshot(store: name, version: $0.version, models: $0.models) }
    }

    /// One model and the version it was read at.
    public func model(_ id: String) -> (value: JSONValue, version: UInt64)? {
        state.withLock { state in state.models[id].map { ($0, state.version) } }
    }

    public var modelIDs: [String] { state.withLock { Array($0.models.keys) } }

    /// The change sets after `version`, oldest first, or nil if the history no longer reaches back.
    public func changes(since version: UInt64) -> [ChangeSet]? {
        state.withLock { state in
            let (missing, changeSets) = state.history.after(version, latest: state.version)
            return missing == nil ? changeSets : nil
        }
    }

    // MARK: Committing

    /// Applies `operations` atomically as one change set and notifies observers before returning.
    @discardableResult
    public func commit(_ operations: [StoreOperation]) throws(StoreError) -> ChangeSet {
        guard !operations.isEmpty else { throw .emptyCommit }
        let reentrant = state.withLock { state in
            state.notifyingThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
        }
        guard !reentrant else { throw .reentrantCommit }
        if let replication { return try commitReplicated(operations, through: replication) }
        let result: Result<ChangeSet, StoreError> = commitLock.withLock { notified in
            let applied: Result<ChangeSet, StoreError> = state.withLock { state in
                var models = state.models
                state.models = [:]  // keep `models` uniquely referenced while it is edited
                defer { state.models = models }
                let changes: [ModelChange]
                do throws(StoreError) {
                    changes = try Self.apply(operations, to: &models)
                } catch {
                    return .failure(error)
                }
                state.version += 1
                let changeSet = ChangeSet(
                    store: name, version: state.version,
                    committedAtMicroseconds: Clock.microsecondsSinceEpoch(), changes: changes)
                state.history.append(changeSet, number: state.version)
                state.notifyingThread = pthread_self()
                return .success(changeSet)
            }
            if case .success(let changeSet) = applied {
                notify(changeSet)
                notified = changeSet.version
                state.withLock { $0.notifyingThread = nil }
            }
            return applied
        }
        return try result.get()
    }

    /// Applies every operation or, on the first failure, restores every touched model and throws.
    static func apply(_ operations: [StoreOperation], to models: inout [String: JSONValue]) throws(StoreError)
        -> [ModelChange]
    {
        var originals: [String: JSONValue?] = [:]
        var changes: [ModelChange] = []
        do throws(StoreError) {
            for operation in operations {
                let id = operation.model
                guard Self.isValidModelID(id) else { throw StoreError.invalidModelID(id) }
                if originals[id] == nil { originals[id] = .some(models[id]) }
                switch operation {
                case .put(_, let value):
                    guard value.objectValue != nil else { throw StoreError.notAnObject("a model") }
                    let old = models.updateValue(value, forKey: id)
                    changes.append(ModelChange(model: id, keyPath: .whole, oldValue: old, newValue: value))
                case .patch(_, let patch):
                    guard patch.objectValue != nil else { throw StoreError.notAnObject("a merge patch") }
                    guard var model = models.removeValue(forKey: id) else { throw StoreError.noSuchModel(id) }
                    let before = model
                    for effect in model.applyMergePatch(patch) {
                        changes.append(ModelChange(
                            model: id, keyPath: ModelKeyPath(effect.path),
                            oldValue: before.value(at: effect.path), newValue: effect.value))
                    }
                    models[id] = model
                case .set(_, let keyPath, let value):
                    guard var model = models.removeValue(forKey: id) else { throw StoreError.noSuchModel(id) }
                    if keyPath.components.isEmpty, value?.objectValue == nil {
                        models[id] = model
                        throw StoreError.notAnObject("a model")
                    }
                    let old = model.value(at: keyPath.components)
                    model.setValue(value, at: keyPath.components[...])
                    models[id] = model
                    changes.append(ModelChange(model: id, keyPath: keyPath, oldValue: old, newValue: value))
                case .delete:
                    guard let old = models.removeValue(forKey: id) else { throw StoreError.noSuchModel(id) }
                    changes.append(ModelChange(model: id, keyPath: .whole, oldValue: old, newValue: nil))
                }
            }
        } catch {
            for (id, original) in originals {
                models[id] = original
            }
            throw error
        }
        return changes
    }

    static func isValidModelID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 128 && !id.contains("/") && !id.unicodeScalars.contains { $0.value < 0x20 }
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

    func notify(_ changeSet: ChangeSet) {
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

    /// 64 random bits in hex.
    static func newEpoch() -> String {
        let value = UInt64.random(in: 0...UInt64.max)
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
