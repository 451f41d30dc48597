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
    let callback: @Sendable (ChangeSet) -> Void
    var cancelled = false
    /// The thread running `callback` right now, if any.
    var callingThread: pthread_t?

    init(model: String?, keyPathPrefix: ModelKeyPath?, options: ObservationOptions,
         callback: @escaping @Sendable (ChangeSet) -> Void) {
        self.model = model
        self.keyPathPrefix = keyPathPrefix
        self.options = options
        self.callback = callback
    }

    /// The part of `changeSet` this observer asked for, or nil if none of it.
    func filter(_ changeSet: ChangeSet) -> ChangeSet? {
        if model == nil && keyPathPrefix == nil && options == .both { return changeSet }
        var filtered = changeSet
        filtered.changes = changeSet.changes.compactMap { change in
            if let model, change.model != model { return nil }
            if let keyPathPrefix, !change.keyPath.isRelated(to: keyPathPrefix) { return nil }
            var kept = change
            if !options.contains(.old) { kept.oldValue = nil }
            if !options.contains(.new) { kept.newValue = nil }
            return kept
        }
        return filtered.changes.isEmpty ? nil : filtered
    }
}
