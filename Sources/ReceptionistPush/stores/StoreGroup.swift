import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// The subscribers of one store that asked for the same options, served by one receptionist
/// with that filter and policy: `each` without `maxRate`, `batch` at `1 / maxRate` with it. The
/// receptionist filters and coalesces on the committing thread; the group encodes each frame
/// once, on the loop, for all of its members (invariant 19).
///
/// Invariants:
/// - Every member starts from the group's projection (snapshot or replay through the filter)
///   and is then handed frames by position, so applying them in order gives the projected store
///   (`ChangeFilter`'s invariant) and nothing is doubled or skipped (invariant 18).
/// - A coalesced frame covers the change sets after `from` (the group's previous frame) up to
///   `version`; a member's position is never below `from`, since it joined at a snapshot or
///   replay read after that frame went out.
///
/// The thread `context` runs its work on (the loop's) only.
final class StoreGroup {
    let store: ModelStore
    let options: SubscriptionOptions
    let filter: ChangeFilter
    private var members = MemberList()
    private var receptionist: Receptionist?
    /// The last snapshot sent, reused while the version stands: a reconnect storm asks for the
    /// same one, and every subscriber gets the same event, its frames built once. Shared by the
    /// store's unfiltered groups.
    private let snapshots: SnapshotSlot
    private var cachedSnapshot: (version: UInt64, reset: Bool, event: PushEvent)? {
        get { snapshots.cached }
        set { snapshots.cached = newValue }
    }
    /// The change sets fanned out lately (without `maxRate`), as the events members got, so that
    /// a resume replays the very same events (and bytes) instead of encoding them again. Its
    /// bytes count against the store's `budget`, shared by its groups.
    private var recent: HistoryRing<PushEvent>
    private let budget: HistoryBudget
    /// The version the group's last coalesced frame brought its members to.
    private var frameVersion: UInt64
    private let counters: PushCounters

    /// The most change sets one delivery brings to the loop. Past it the committing job waits.
    static let maxChangeSetsPerDelivery = 256

    init(store: ModelStore, options: SubscriptionOptions, context: any ExecutionContext, historyLimit: Int,
         budget: HistoryBudget = HistoryBudget(limit: .max), sharedSnapshot: SnapshotSlot? = nil, counters: PushCounters)
    {
        self.store = store
        self.options = options
        self.counters = counters
        self.budget = budget
        filter = ChangeFilter(models: options.models, paths: options.paths.map { $0.map(ModelKeyPath.init) })
        snapshots = filter.isAll ? sharedSnapshot ?? SnapshotSlot() : SnapshotSlot()
        recent = HistoryRing(capacity: options.maxRate == nil ? historyLimit : 0, maxBytes: budget.limit)
        frameVersion = 0
        let group = ThreadBound(WeakGroup(self))
        // One delivery is fanned out in one go on the loop; bounding what it may hold bounds the
        // time the loop spends on it (a job committing flat out waits instead, invariant 16).
        receptionist = Receptionist(
            store: store, filter: filter, policy: options.maxRate.map { .batch(intervalSeconds: 1 / $0) } ?? .each,
            target: context, maxPendingChangeSets: Self.maxChangeSetsPerDelivery
        ) { delivery in
            group.value.group?.fanOut(delivery)
        }
        // Read after the receptionist observes, so no change set falls between the two.
        frameVersion = store.version
    }

    deinit {
        receptionist?.cancel()
    }

    var memberCount: Int { members.count }

    func add(_ subscription: Subscription) {
        members.insert(subscription)
    }

    /// Returns whether it was a member.
    @discardableResult
    func remove(_ subscription: Subscription) -> Bool {
        members.remove(subscription)
    }

    func forEachMember(_ body: (Subscription) -> Void) {
        for subscription in members { body(subscription) }
    }

    /// Stops the receptionist: the group has no members left and is being dropped.
    func close() {
        receptionist?.cancel()
        receptionist = nil
        forgetRecent()
    }

    /// Keeps `event` for resumes, within the store's budget: past it, this group's oldest go
    /// first (all of them, when other groups hold the budget).
    private func keep(_ event: PushEvent, number: UInt64) {
        let before = recent.bytes
        recent.append(event, number: number, size: event.json.count)
        budget.charge(recent.bytes - before)
        while budget.isSpent, let dropped = recent.dropOldest() { budget.charge(-dropped) }
    }

    private func forgetRecent() {
        budget.charge(-recent.bytes)
        recent.removeAll()
    }

    /// A consistent, projected snapshot as a `snapshot` event (whose `id` is its version),
    /// shared by every member that asks while the version stands.
    func snapshot(reset: Bool) -> PushEvent {
        let version = store.version
        if let cached = cachedSnapshot, cached.version == version, cached.reset == reset {
            return cached.event
        }
        var snapshot = store.snapshot()
        // Read with the models: a replica reset between two reads changes both.
        let epoch = snapshot.epoch ?? store.epoch
        if !filter.isAll {
            snapshot = StoreSnapshot(store: snapshot.store, version: snapshot.version, models: filter.project(snapshot.models))
        }
        let event = PushEvent(
            name: "snapshot", id: snapshot.version, epoch: epoch,
            json: PushEncoder.snapshot(snapshot, reset: reset, epoch: epoch, filter: options))
        cachedSnapshot = (snapshot.version, reset, event)
        return event
    }

    /// Hands a resuming member the change sets it missed, through the filter: each one as the
    /// event fanned out live where it is still kept, or, with `maxRate`, all of them in one
    /// coalesced frame. Then its position is past them all.
    func replay(_ missed: [ChangeSet], to subscription: Subscription) {
        guard let last = missed.last else { return }
        if options.maxRate != nil {
            var buffer = CoalescingBuffer()
            for changeSet in missed {
                let changes = filter.apply(changeSet.changes)
                guard !changes.isEmpty else { continue }
                var kept = changeSet
                kept.changes = changes
                buffer.absorb(kept)
            }
            if !buffer.isEmpty {
                let first = buffer.firstCommittedAtMicroseconds, committedAt = buffer.committedAtMicroseconds
                subscription.deliver(frame(
                    version: last.version, from: subscription.position, firstCommittedAt: first,
                    committedAt: committedAt, changes: filter.projectingRoots(buffer.take()), epoch: last.epoch))
            } else if filter.isAll {
                // Versions that changed nothing (a replicated store's empty change sets): an
                // unfiltered member is told of every version, so it sees none skipped.
                subscription.deliver(frame(
                    version: last.version, from: subscription.position, firstCommittedAt: missed[0].committedAtMicroseconds,
                    committedAt: last.committedAtMicroseconds, changes: [], epoch: last.epoch))
            }
        } else {
            for changeSet in missed {
                guard let event = event(for: changeSet) else { continue }
                subscription.deliver(event)
            }
        }
        subscription.advance(to: last.version)
    }

    /// The event for a change set being replayed: the one fanned out live when it is still kept,
    /// else a new one; nil when the filter leaves nothing of it. A change set that changed nothing
    /// (a replicated store's empty version) goes to an unfiltered member as it went live.
    private func event(for changeSet: ChangeSet) -> PushEvent? {
        // The same version, committed at the same moment: after a replica reset a number may
        // have been reused before the reset reached this group.
        if let event = recent.element(numbered: changeSet.version),
           event.changeSet?.committedAtMicroseconds == changeSet.committedAtMicroseconds {
            return event
        }
        var kept = changeSet
        kept.changes = filter.apply(changeSet.changes)
        guard !kept.changes.isEmpty || filter.isAll else { return nil }
        return PushEvent.changes(kept, old: options.old, epoch: changeSet.epoch ?? store.epoch)
    }

    private func frame(
        version: UInt64, from: UInt64, firstCommittedAt: UInt64, committedAt: UInt64, changes: [ModelChange], epoch: String?
    ) -> PushEvent {
        let json = PushEncoder.coalesced(
            store: store.name, version: version, from: from, firstCommittedAt: firstCommittedAt,
            committedAt: committedAt, changes: changes, old: options.old)
        // The change set behind the frame, for a member that is behind and conflates it further.
        var changeSet = ChangeSet(store: store.name, version: version, committedAtMicroseconds: committedAt, changes: changes)
        changeSet.epoch = epoch
        return PushEvent(name: "changes", id: version, epoch: epoch ?? store.epoch, json: json, changeSet: changeSet)
    }

    /// Every member starts again from a fresh snapshot marked reset: a cluster replica was
    /// re-read whole, and the versions in between are unknown.
    private func resetMembers() {
        cachedSnapshot = nil
        forgetRecent()
        let event = snapshot(reset: true)
        frameVersion = event.id ?? 0
        for subscription in members {
            subscription.reset(to: event.id ?? 0)
            subscription.sink.sendOwed(event)
        }
    }

    /// The receptionist's delivery: the change sets since the last one, in version order, or
    /// (with `maxRate`) the latest value per (model, path) since the last frame.
    private func fanOut(_ delivery: Receptionist.Delivery) {
        // A delivery already on its way when the group closed: nobody is left to send it to, and
        // the budget must not be charged for a ring about to go.
        guard receptionist != nil else { return }
        var delivered = 0
        // The version has moved: the snapshot cached for the old one will not be asked for again,
        // and a thousand groups must not each keep a copy of the store.
        cachedSnapshot = nil
        if options.maxRate != nil {
            if delivery.containsReset {
                resetMembers()
                return
            }
            let from = frameVersion
            frameVersion = delivery.version
            // An unfiltered group's frame says every version, empty ones (a replicated store's)
            // included: its members would take a version skipped for a lost one.
            guard !members.isEmpty, !delivery.changes.isEmpty || filter.isAll else { return }
            let event = frame(
                version: delivery.version, from: from, firstCommittedAt: delivery.firstCommittedAtMicroseconds,
                committedAt: delivery.committedAtMicroseconds, changes: filter.projectingRoots(delivery.changes), epoch: delivery.epoch)
            for subscription in members where subscription.deliver(event) {
                delivered += 1
            }
            counters.deliveries += delivered
            counters.changeSetsFannedOut += delivery.changeSetCount
            return
        }
        // A replica reset may put other models in place at a version already seen: a snapshot
        // cached for that version no longer describes the store.
        if delivery.changeSets.contains(where: \.isReset) {
            cachedSnapshot = nil
            forgetRecent()
        }
        guard !members.isEmpty else { return }
        for changeSet in delivery.changeSets {
            if changeSet.isReset {
                resetMembers()
                continue
            }
            // In the epoch it was made in: a reset may have moved the store on since.
            let event = PushEvent.changes(changeSet, old: options.old, epoch: changeSet.epoch ?? store.epoch)
            if changeSet.version > (recent.newestNumber ?? 0) { keep(event, number: changeSet.version) }
            for subscription in members where subscription.deliver(event) {
                delivered += 1
            }
        }
        counters.deliveries += delivered
        counters.changeSetsFannedOut += delivery.changeSets.count
    }

    private final class WeakGroup {
        weak var group: StoreGroup?
        init(_ group: StoreGroup) { self.group = group }
    }
}
