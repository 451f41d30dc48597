import Glibc
import ReceptionistJSON

/// One registered observer of a store.
///
/// Why `@unchecked Sendable` is safe: `cancelled` and `callingThread` are read and written only
/// while the owning store's observer lock is held; everything else is immutable.
final class ObserverEntry: @unchecked Sendable {
    let model: String?
    let keyPathPrefix: ModelKeyPath?
    let options: ObservationOptions
    /// Which models and paths, with changes above the paths cut down to them.
    let changeFilter: ChangeFilter
    let callback: @Sendable (ChangeSet) -> Void
    /// Every change set passes whole: decided once here, not read out of four fields (the
    /// filter's copied, with its references) on every commit.
    private let passesEverything: Bool
    var cancelled = false
    /// The thread running `callback` right now, if any.
    var callingThread: pthread_t?

    init(model: String?, keyPathPrefix: ModelKeyPath?, options: ObservationOptions, changeFilter: ChangeFilter = .all,
         callback: @escaping @Sendable (ChangeSet) -> Void) {
        self.model = model
        self.keyPathPrefix = keyPathPrefix
        self.options = options
        self.changeFilter = changeFilter
        self.callback = callback
        passesEverything = model == nil && keyPathPrefix == nil && options == .both && changeFilter.isAll
    }

    /// The part of `changeSet` this observer asked for, or nil if none of it. A replica's reset
    /// always passes, even with nothing left in it: the observer must learn that it happened.
    func filter(_ changeSet: ChangeSet) -> ChangeSet? {
        if passesEverything { return changeSet }
        var filtered = changeSet
        filtered.changes = changeFilter.apply(changeSet.changes)
        // A receptionist's observer asks for both values and no single model or prefix: one
        // pass over the changes is enough, on the committing thread, for every group.
        guard model != nil || keyPathPrefix != nil || options != .both else {
            return filtered.changes.isEmpty && !changeSet.isReset ? nil : filtered
        }
        filtered.changes = filtered.changes.compactMap { change in
            if let model, change.model != model { return nil }
            if let keyPathPrefix, !change.keyPath.isRelated(to: keyPathPrefix) { return nil }
            var kept = change
            if !options.contains(.old) { kept.oldValue = nil }
            if !options.contains(.new) { kept.newValue = nil }
            return kept
        }
        return filtered.changes.isEmpty && !changeSet.isReset ? nil : filtered
    }
}
