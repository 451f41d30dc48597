import ReceptionistJSON

/// The latest value per (model, key path) since the last delivery.
///
/// Invariant: applying `changes` in order to the state a receiver had at the previous delivery
/// yields exactly the store's state at `version`. A change to a path replaces pending changes
/// beneath it; a change beneath a pending path is folded into that pending value.
///
/// Old values: a pending change keeps the value its path had at the last delivery, before the
/// first change folded into it. When it replaces pending changes beneath it, its own old value
/// (the value just before it) has their first old values put back in. (An object created only
/// on the way to a new path cannot be told from one that was there, so it stays in `old`.)
public struct CoalescingBuffer: Sendable {
    private var models: [String: [ModelChange]] = [:]
    private var order: [String] = []
    public private(set) var version: UInt64 = 0
    public private(set) var absorbed = 0
    /// Commit times of the first and the last change set absorbed since the last `take`.
    public private(set) var firstCommittedAtMicroseconds: UInt64 = 0
    public private(set) var committedAtMicroseconds: UInt64 = 0
    /// Whether a replica's reset was absorbed since the last `take`.
    public private(set) var sawReset = false

    public init() {}

    public var isEmpty: Bool { order.isEmpty }

    public mutating func absorb(_ changeSet: ChangeSet) {
        version = changeSet.version
        if firstCommittedAtMicroseconds == 0 { firstCommittedAtMicroseconds = changeSet.committedAtMicroseconds }
        committedAtMicroseconds = changeSet.committedAtMicroseconds
        sawReset = sawReset || changeSet.isReset
        for change in changeSet.changes {
            absorb(change)
        }
    }

    private mutating func absorb(_ change: ModelChange) {
        absorbed += 1
        // One lookup, and the model's pending list edited in place (a copy taken out of the
        // table and written back would reallocate the list on every change).
        if Self.fold(change, into: &models[change.model, default: []]) {
            order.append(change.model)
        }
    }

    /// Folds `change` into one model's pending changes, in which no path lies under another.
    /// Returns whether the list was empty before.
    private static func fold(_ change: ModelChange, into pending: inout [ModelChange]) -> Bool {
        if pending.isEmpty {
            pending.append(change)
            return true
        }
        // The common case: the same path again. Nothing can be above or beneath it, since a
        // pending path swallows changes beneath it and is replaced by a change above it.
        if let same = pending.firstIndex(where: { $0.keyPath == change.keyPath }) {
            // Edited in place: the model and path stay, the old value stays the first one.
            pending[same].newValue = change.newValue
            pending[same].kind = ModelChange.kind(old: pending[same].oldValue, new: change.newValue)
            return false
        }
        if let ancestor = pending.firstIndex(where: { $0.keyPath.isPrefix(of: change.keyPath) }) {
            let relative = change.keyPath.components.dropFirst(pending[ancestor].keyPath.components.count)
            var value = pending[ancestor].newValue ?? .object([:])
            value.setValue(change.newValue, at: relative)
            pending[ancestor] = ModelChange(
                model: change.model, keyPath: pending[ancestor].keyPath,
                oldValue: pending[ancestor].oldValue, newValue: value)
        } else {
            var replacing = change
            if replacing.oldValue != nil {
                let depth = change.keyPath.components.count
                for beneath in pending where change.keyPath.isPrefix(of: beneath.keyPath) {
                    replacing.oldValue?.setValue(beneath.oldValue, at: beneath.keyPath.components.dropFirst(depth))
                }
                replacing.kind = replacing.newValue == nil ? .deleted : .updated
            }
            pending.removeAll { change.keyPath.isPrefix(of: $0.keyPath) }
            pending.append(replacing)
        }
        return false
    }

    /// Everything pending, in an order that converges, and empties the buffer.
    public mutating func take() -> [ModelChange] {
        var result: [ModelChange] = []
        for model in order {
            result += models[model] ?? []
        }
        models.removeAll(keepingCapacity: true)
        order.removeAll(keepingCapacity: true)
        absorbed = 0
        firstCommittedAtMicroseconds = 0
        committedAtMicroseconds = 0
        sawReset = false
        return result
    }
}
