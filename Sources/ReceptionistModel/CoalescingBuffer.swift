import ReceptionistJSON

/// The latest value per (model, key path) since the last delivery.
///
/// Invariant: applying `changes` in order to the state a receiver had at the previous delivery
/// yields exactly the store's state at `version`. A change to a path replaces pending changes
/// beneath it; a change beneath a pending path is folded into that pending value.
///
/// Old values: a pending change keeps the old value of the first change at its exact path since
/// the last delivery; when it replaced changes beneath it, it keeps the value just before itself.
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
        guard var pending = models[change.model] else {
            models[change.model] = [change]
            order.append(change.model)
            return
        }
        if let ancestor = pending.firstIndex(where: { $0.keyPath.isPrefix(of: change.keyPath) && $0.keyPath != change.keyPath }) {
            let relative = change.keyPath.components.dropFirst(pending[ancestor].keyPath.components.count)
            var value = pending[ancestor].newValue ?? .object([:])
            value.setValue(change.newValue, at: relative)
            pending[ancestor] = ModelChange(
                model: change.model, keyPath: pending[ancestor].keyPath,
                oldValue: pending[ancestor].oldValue, newValue: value)
        } else {
            let earlier = pending.first { $0.keyPath == change.keyPath }
            pending.removeAll { change.keyPath.isPrefix(of: $0.keyPath) }
            pending.append(ModelChange(
                model: change.model, keyPath: change.keyPath,
                oldValue: earlier?.oldValue ?? change.oldValue, newValue: change.newValue))
        }
        models[change.model] = pending
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
