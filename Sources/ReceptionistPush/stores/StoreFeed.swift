import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// The push core's side of one store: a receptionist that bounces every change set onto the
/// hub's execution context, and the subscriptions it fans out to.
///
/// The receptionist runs the `each` policy, so every change set arrives in version order and none
/// is lost (a context that falls behind makes the committing jobs wait, never drops). Each change
/// set is encoded once, into a `PushEvent` every subscriber shares (invariant 19).
///
/// The thread that creates it, which must be the one `context` runs its work on (the loop's).
public final class StoreFeed {
    public let store: ModelStore
    private var receptionist: Receptionist?
    private var subscriptions: [ObjectIdentifier: Subscription] = [:]
    /// The last snapshot sent, reused while the version stands: a reconnect storm asks for the
    /// same one, and every subscriber gets the same event, its frames built once.
    private var cachedSnapshot: (version: UInt64, reset: Bool, event: PushEvent)?
    /// The change sets fanned out lately, as the events their subscribers got, so that a resume
    /// replays the very same events (and bytes) instead of encoding them again per subscriber.
    private var recent: HistoryRing<PushEvent>

    private let counters: PushCounters
    /// The most change sets one delivery brings to the loop. Past it the committing job waits.
    public static let maxChangeSetsPerDelivery = 256

    init(store: ModelStore, context: any ExecutionContext, historyLimit: Int, counters: PushCounters) {
        self.store = store
        self.counters = counters
        recent = HistoryRing(capacity: historyLimit)
        let feed = ThreadBound(WeakFeed(self))
        // One delivery is fanned out in one go on the loop; bounding what it may hold bounds the
        // time the loop spends on it (a job committing flat out waits instead, invariant 16).
        receptionist = Receptionist(
            store: store, policy: .each, target: context, maxPendingChangeSets: Self.maxChangeSetsPerDelivery
        ) { delivery in
            feed.value.feed?.fanOut(delivery)
        }
    }

    deinit {
        receptionist?.cancel()
    }

    func add(_ subscription: Subscription) {
        subscriptions[ObjectIdentifier(subscription)] = subscription
    }

    public var subscriberCount: Int { subscriptions.count }

    func remove(_ subscription: Subscription) {
        subscriptions.removeValue(forKey: ObjectIdentifier(subscription))
    }

    /// A consistent snapshot as a `snapshot` event (whose `id` is its version), shared by every
    /// subscriber that asks while the version stands.
    func snapshot(reset: Bool) -> PushEvent {
        let version = store.version
        if let cached = cachedSnapshot, cached.version == version, cached.reset == reset {
            return cached.event
        }
        let snapshot = store.snapshot()
        let event = PushEvent(
            name: "snapshot", id: snapshot.version, json: PushEncoder.snapshot(snapshot, reset: reset, epoch: store.epoch))
        cachedSnapshot = (snapshot.version, reset, event)
        return event
    }

    /// The event for a change set being replayed: the one fanned out live when it is still kept,
    /// else a new one.
    func event(for changeSet: ChangeSet) -> PushEvent {
        // The same version, committed at the same moment: after a replica reset a number may
        // have been reused before the reset reached this feed.
        if let event = recent.element(numbered: changeSet.version),
           event.changeSet?.committedAtMicroseconds == changeSet.committedAtMicroseconds {
            return event
        }
        return PushEvent.changes(changeSet)
    }

    /// The receptionist's delivery: every change set since the last one, in version order.
    private func fanOut(_ delivery: Receptionist.Delivery) {
        // A replica reset may put other models in place at a version already seen: a snapshot
        // cached for that version no longer describes the store.
        if delivery.changeSets.contains(where: \.isReset) {
            cachedSnapshot = nil
            recent.removeAll()
        }
        guard !subscriptions.isEmpty else { return }
        var delivered = 0
        for changeSet in delivery.changeSets {
            if changeSet.isReset {
                // A cluster replica was re-read whole: the versions in between are unknown, so
                // every subscriber starts again from a snapshot marked reset.
                let event = snapshot(reset: true)
                for subscription in subscriptions.values {
                    subscription.reset(to: event.id ?? 0)
                    subscription.sink.sendOwed(event)
                }
                continue
            }
            let event = PushEvent.changes(changeSet)
            if changeSet.version > (recent.newestNumber ?? 0) { recent.append(event, number: changeSet.version) }
            for subscription in subscriptions.values where subscription.deliver(event) {
                delivered += 1
            }
        }
        counters.deliveries += delivered
        counters.changeSetsFannedOut += delivery.changeSets.count
    }

    private final class WeakFeed {
        weak var feed: StoreFeed?
        init(_ feed: StoreFeed) { self.feed = feed }
    }
}
