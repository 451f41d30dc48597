import ReceptionistJSON

/// The latest value per (model, key path) since the last delivery.
///
/// Invariant: applying `changes` in order to the state a receiver had at the previous delivery
/// yields exactly the store's state at `version`. A change to a path replaces pending changes
/// beneath it; a change beneath a pending path is folded into that pending value. Changes to
/// different models are independent; a model's changes are handed over together, models in the
/// order they first changed, and within a model a change that replaces others goes after them.
///
/// Member order: a member removed and then set again within one take moves to the end of its
/// object in the store, so the take carries its removal and then its new value, together, where
/// it was set again: a receiver that applies them holds the members in the store's order. (A
/// model has no place among models to keep: one deleted and put again is changed in place,
/// unless its id is spelt in another Unicode form than before: the old id's removal goes too.) An
/// old value put back together is exact but for its members' order.
///
/// Old values: a pending change keeps the value its path had at the last delivery, before the
/// first change folded into it. When it replaces pending changes beneath it, its own old value
/// (the value just before it) has their first old values put back in. (An object created only
/// on the way to a new path cannot be told from one that was there, so it stays in `old`.)
///
/// Layout: the committing thread absorbs every change of a coalescing receptionist, so a change
/// costs one lookup of its model and no copy of the pending list. The lookup is an array index
/// when the change carries its store slot (`slotHint`) and the model was seen there since the
/// last `take`; otherwise a `ModelTable` probe (a hash of the id, without `Hasher`). Pending
/// changes sit in one flat array; each model's live entries are chained through `links` from
/// `heads`. `take` hands the array over whole when no entry was replaced and each model's
/// entries are already together (as when changes land on paths already pending), without
/// copying an element.
public struct CoalescingBuffer: Sendable {
    private var pending: [ModelChange] = []
    /// Per entry of `pending`: the next live entry of the same model, `end`, or `replaced`.
    private var links: [Int32] = []
    /// Per model with pending changes: its first live entry.
    private var heads = ModelTable()
    /// Per store slot: the first live entry of the model last seen in that slot, or `end`. A
    /// cache in front of `heads`, used only when the entry it names is live and of the change's
    /// model (a slot is used again after a delete). A model's first entry changes only when that
    /// entry is replaced, so a live entry found here is still the first.
    private var slotHeads: [Int32] = []
    /// The slots set in `slotHeads` since the last `take`, so that `take` clears only those.
    private var slotsUsed: [Int32] = []
    private var replacedCount = 0
    /// Every model's live entries are adjacent in `pending`.
    private var grouped = true
    public private(set) var version: UInt64 = 0
    public private(set) var absorbed = 0
    /// Commit times of the first and the last change set absorbed since the last `take`.
    public private(set) var firstCommittedAtMicroseconds: UInt64 = 0
    public private(set) var committedAtMicroseconds: UInt64 = 0
    /// Whether a replica's reset was absorbed since the last `take`.
    public private(set) var sawReset = false
    /// The epoch of the last change set absorbed (`ChangeSet.epoch`).
    public private(set) var epoch: String?

    private static let end: Int32 = -1
    private static let replaced: Int32 = -2
    /// In the `slotHint` of a pending removal that the next entry of its chain, at the same path,
    /// follows (`moveToEnd`): later changes to the path go to that next entry. A pending entry's
    /// own hint is not read otherwise, and a negative hint is no hint to whoever reads it later.
    private static let superseded: Int32 = -3

    public init() {}

    public var isEmpty: Bool { heads.isEmpty }

    public mutating func absorb(_ changeSet: ChangeSet) {
        version = changeSet.version
        if firstCommittedAtMicroseconds == 0 { firstCommittedAtMicroseconds = changeSet.committedAtMicroseconds }
        committedAtMicroseconds = changeSet.committedAtMicroseconds
        sawReset = sawReset || changeSet.isReset
        epoch = changeSet.epoch
        changeSet.changes.withUnsafeBufferPointer { changes in
            guard let base = changes.baseAddress else { return }
            for index in changes.indices {
                absorb(base + index)
            }
        }
        if replacedCount >= Self.compactionFloor, replacedCount * 2 >= pending.count { compact() }
    }

    /// Reads the change through its pointer, field by field: a change that lands on a pending
    /// path (the common case) needs only its new value, and copying it whole would retain and
    /// release every field.
    private mutating func absorb(_ change: UnsafePointer<ModelChange>) {
        absorbed += 1
        guard let head = pendingHead(of: change) else {
            // `pendingHead` entered the model in `heads` at this position.
            let position = append(change.pointee)
            remember(position, at: change.pointee.slotHint)
            return
        }
        // The common case: the same path again. Nothing can be above or beneath it, since a
        // pending path swallows changes beneath it and is replaced by a change above it.
        var previous = Self.end
        var entry = head
        while entry != Self.end {
            let position = Int(entry)
            if pending[position].keyPath == change.pointee.keyPath, pending[position].slotHint != Self.superseded {
                if pending[position].newValue == nil, let value = change.pointee.newValue,
                    change.pointee.keyPath.count > 0 || !Self.sameSpelling(pending[position].model, change.pointee.model)
                {
                    return moveToEnd(position, after: previous, head: head, value: value, change: change.pointee)
                }
                // Edited in place: the model and path stay, the old value stays the first one.
                pending[position].newValue = change.pointee.newValue
                pending[position].kind = ModelChange.kind(old: pending[position].oldValue, new: change.pointee.newValue)
                if pending[position].oldValue == nil, pending[position].newValue == nil {
                    if pending[position].keyPath.count == 0 {
                        if previous == Self.end, links[position] == Self.end { forget(position, of: change.pointee.model) }
                    } else if previous == Self.end || pending[Int(previous)].slotHint != Self.superseded {
                        // A member made and removed again since the last take: nothing to tell,
                        // unless it follows a removal a move left (the pair says the member moved).
                        unlink(position, after: previous, of: change.pointee.model)
                    }
                }
                return
            }
            previous = entry
            entry = links[position]
        }
        previous = Self.end
        entry = head
        while entry != Self.end {
            let position = Int(entry)
            if pending[position].keyPath.isPrefix(of: change.pointee.keyPath), pending[position].slotHint != Self.superseded {
                let relative = change.pointee.keyPath.components.dropFirst(pending[position].keyPath.count)
                // A model has no place to keep: one deleted is made again in place, unless its id
                // is now spelt another way.
                let inPlace = pending[position].keyPath.count == 0 && Self.sameSpelling(pending[position].model, change.pointee.model)
                let model: JSONValue? = inPlace ? .object([:]) : nil
                guard var value = pending[position].newValue ?? model else {
                    // Removed, and now made again on the way to the new path.
                    var made = JSONValue.object([:])
                    made.setValue(change.pointee.newValue, at: relative)
                    return moveToEnd(position, after: previous, head: head, value: made, change: change.pointee)
                }
                value.setValue(change.pointee.newValue, at: relative)
                pending[position].newValue = value
                pending[position].kind = ModelChange.kind(old: pending[position].oldValue, new: value)
                return
            }
            previous = entry
            entry = links[position]
        }
        replace(beneath: change.pointee, head: head)
    }

    /// A model made and deleted again since the last take, whose one entry is now that it is
    /// absent, as it was: nothing to tell. Forgotten, the buffer holds at most what the store
    /// holds, and the models that were there at the last take, however many come and go; kept,
    /// a subscriber stalled while models came and went was owed one removal for each.
    private mutating func forget(_ position: Int, of model: String) {
        links[position] = Self.replaced
        pending[position].oldValue = nil
        replacedCount += 1
        _ = heads.remove(model)
    }

    /// A member's entry that says it is absent, as it was: taken out of its model's chain, and
    /// dropped at the next compaction. Kept, every key set and removed between two takes left
    /// one, and each later key walked them all.
    private mutating func unlink(_ position: Int, after previous: Int32, of model: String) {
        let next = links[position]
        if previous != Self.end {
            links[Int(previous)] = next
        } else if next == Self.end {
            _ = heads.remove(model)
        } else {
            heads.set(next, for: model)
        }
        links[position] = Self.replaced
        replacedCount += 1
    }

    /// Entries replaced or forgotten are dropped (`compact`) once there are this many, and as
    /// many as live ones: what the buffer holds stays within twice what it tells.
    static let compactionFloor = 4096

    /// Drops the replaced entries, each model's live ones kept in order and together.
    private mutating func compact() {
        var kept: [ModelChange] = []
        var keptLinks: [Int32] = []
        kept.reserveCapacity(pending.count - replacedCount)
        keptLinks.reserveCapacity(pending.count - replacedCount)
        var keptHeads = ModelTable()
        // A chain's positions rise: its first live entry met is its head.
        for first in pending.indices where links[first] != Self.replaced {
            keptHeads.set(Int32(kept.count), for: pending[first].model)
            var entry = Int32(first)
            while entry != Self.end {
                let position = Int(entry)
                let next = links[position]
                kept.append(pending[position])
                keptLinks.append(next == Self.end ? Self.end : Int32(kept.count))
                links[position] = Self.replaced
                entry = next
            }
        }
        pending = kept
        links = keptLinks
        heads = keptHeads
        for slot in slotsUsed { slotHeads[Int(slot)] = Self.end }
        slotsUsed.removeAll(keepingCapacity: true)
        replacedCount = 0
        grouped = true
    }

    /// How many entries the buffer holds, live or not (for tests of its bound).
    var heldEntries: Int { pending.count }

    /// Whether two ids of one model are written with the same bytes: a model deleted and made
    /// again under another Unicode form of its id is a removal of the old id and a new model
    /// under the new one, for a receiver that keys models by their bytes.
    private static func sameSpelling(_ one: String, _ other: String) -> Bool {
        one.utf8.elementsEqual(other.utf8)
    }

    /// A pending removal at `position` (after `previous` in its model's chain) whose path is set
    /// again to `value`: the store put the member back at the end of its object. Its entries
    /// leave their place, and the removal, with the path's first old value, and the new value
    /// go last in the chain, the removal marked `superseded`. Whatever the path's history in
    /// the take, it has these two entries at most.
    private mutating func moveToEnd(_ position: Int, after previous: Int32, head: Int32, value: JSONValue, change: ModelChange) {
        let made = ModelChange(model: change.model, keyPath: pending[position].keyPath, kind: .created, oldValue: nil, newValue: value)
        let removed = previous != Self.end && pending[Int(previous)].slotHint == Self.superseded
        if position == pending.count - 1 {
            // Last already (a chain's positions rise, so last in its chain too): nothing moves.
            if removed {
                pending[position] = made
            } else {
                pending[position].slotHint = Self.superseded
                links[position] = append(made)
            }
            return
        }
        // The model's chain without the entries that move.
        var chain: [Int32] = []
        var entry = head
        while entry != Self.end {
            chain.append(entry)
            entry = links[Int(entry)]
        }
        // A removal that an earlier move left in front of this entry goes too, and keeps the
        // path's first old value.
        let leaving = removed ? [previous, Int32(position)] : [Int32(position)]
        var removal = pending[Int(leaving[0])]
        removal.kind = .deleted
        removal.slotHint = Self.superseded
        for index in leaving {
            links[Int(index)] = Self.replaced
            pending[Int(index)].oldValue = nil
            pending[Int(index)].newValue = nil
            replacedCount += 1
        }
        chain.removeAll { leaving.contains($0) }
        if let last = chain.last, Int(last) != pending.count - 1 { grouped = false }
        chain.append(append(removal))
        chain.append(append(made))
        for (entry, next) in zip(chain, chain.dropFirst()) { links[Int(entry)] = next }
        let newHead = chain[0]
        heads.set(newHead, for: change.model)
        remember(newHead, at: change.slotHint)
    }

    /// A change above none of the model's pending paths: it replaces those beneath it, and goes
    /// last in the list, as the model's newest entry.
    private mutating func replace(beneath change: ModelChange, head: Int32) {
        var replacing = change
        let depth = change.keyPath.count
        var previous = Self.end
        var entry = head
        var newHead = head
        var last = Self.end
        // Whether the entry before was a removal that a move left: the entry after it holds the
        // path as made again, whose old value (none) is not the path's first.
        var afterRemoval = false
        while entry != Self.end {
            let position = Int(entry)
            let next = links[position]
            let followsRemoval = afterRemoval
            afterRemoval = pending[position].slotHint == Self.superseded
            if change.keyPath.isPrefix(of: pending[position].keyPath) {
                if !followsRemoval {
                    replacing.oldValue?.setValue(
                        pending[position].oldValue, at: pending[position].keyPath.components.dropFirst(depth))
                }
                // Unlinked and dropped at `take`; its values are released now.
                links[position] = Self.replaced
                pending[position].oldValue = nil
                pending[position].newValue = nil
                replacedCount += 1
                if previous == Self.end { newHead = next } else { links[Int(previous)] = next }
            } else {
                previous = entry
                last = entry
            }
            entry = next
        }
        if change.oldValue != nil {
            replacing.kind = replacing.newValue == nil ? .deleted : .updated
        }
        if last != Self.end && Int(last) != pending.count - 1 { grouped = false }
        let position = append(replacing)
        if last == Self.end { newHead = position } else { links[Int(last)] = position }
        heads.set(newHead, for: change.model)
        remember(newHead, at: change.slotHint)
    }

    /// The first live entry of the change's model, if it has pending changes; if it has none,
    /// nil, and the model is entered in `heads` with the entry `append` will give it next (one
    /// hash of the id for a model's first change since `take`, not a lookup and then a `set`).
    private mutating func pendingHead(of change: UnsafePointer<ModelChange>) -> Int32? {
        let slot = Int(change.pointee.slotHint)
        if slot >= 0, slot < slotHeads.count {
            let entry = slotHeads[slot]
            if entry != Self.end, links[Int(entry)] != Self.replaced, pending[Int(entry)].model == change.pointee.model {
                return entry
            }
        }
        let next = Int32(truncatingIfNeeded: pending.count)
        guard let head = heads.value(for: change.pointee.model, orInsert: next) else { return nil }
        remember(head, at: change.pointee.slotHint)
        return head
    }

    private mutating func remember(_ head: Int32, at slotHint: Int32) {
        guard slotHint >= 0 else { return }
        let slot = Int(slotHint)
        if slot >= slotHeads.count {
            slotHeads.append(contentsOf: repeatElement(Self.end, count: slot + 1 - slotHeads.count))
        }
        if slotHeads[slot] == Self.end { slotsUsed.append(slotHint) }
        slotHeads[slot] = head
    }

    private mutating func append(_ change: ModelChange) -> Int32 {
        precondition(pending.count < Int(Int32.max), "a coalescing buffer holds at most 2^31 changes")
        pending.append(change)
        links.append(Self.end)
        return Int32(pending.count - 1)
    }

    /// Everything pending, in an order that converges, and empties the buffer.
    public mutating func take() -> [ModelChange] {
        var result: [ModelChange] = []
        if replacedCount == 0 && grouped {
            swap(&result, &pending)
            // The next delivery is likely as large as this one.
            pending.reserveCapacity(result.count)
        } else {
            // Each model's chain, from its first entry, models in the order they first changed.
            result.reserveCapacity(pending.count - replacedCount)
            for first in pending.indices where links[first] != Self.replaced {
                var entry = Int32(first)
                while entry != Self.end {
                    let position = Int(entry)
                    result.append(pending[position])
                    entry = links[position]
                    links[position] = Self.replaced
                }
            }
            pending.removeAll(keepingCapacity: true)
        }
        links.removeAll(keepingCapacity: true)
        heads.removeAll()
        for slot in slotsUsed { slotHeads[Int(slot)] = Self.end }
        slotsUsed.removeAll(keepingCapacity: true)
        replacedCount = 0
        grouped = true
        absorbed = 0
        firstCommittedAtMicroseconds = 0
        committedAtMicroseconds = 0
        sawReset = false
        return result
    }
}
