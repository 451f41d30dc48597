import ReceptionistLoop
import ReceptionistModel
import ReceptionistWire

/// The loop's side of one store: a receptionist that bounces every change set onto the loop, and
/// the subscriptions it fans out to.
///
/// The receptionist runs the `each` policy, so every change set arrives in version order and none
/// is lost (a loop that falls behind makes the committing jobs wait, never drops). Each change set
/// is encoded once, into a `PushEvent` every subscriber shares.
///
/// Loop thread only.
final class StoreFeed {
    let store: ModelStore
    private var receptionist: Receptionist?
    private var subscriptions: [ObjectIdentifier: Subscription] = [:]
    /// The last snapshot sent, reused while the version stands (reconnect storms ask for the same one).
    private var cachedSnapshot: (version: UInt64, reset: Bool, json: [UInt8])?

    private let counters: GatewayCounters

    init(store: ModelStore, loop: EventLoop, context: LoopExecutionContext, counters: GatewayCounters) {
        self.store = store
        self.counters = counters
        let feed = LoopBound(WeakFeed(self), loop: loop)
        receptionist = Receptionist(store: store, policy: .each, target: context) { delivery in
            feed.value.feed?.deliver(delivery)
        }
    }

    deinit {
        receptionist?.cancel()
    }

    func add(_ subscription: Subscription) {
        subscriptions[ObjectIdentifier(subscription)] = subscription
    }

    var subscriberCount: Int { subscriptions.count }

    func remove(_ subscription: Subscription) {
        subscriptions.removeValue(forKey: ObjectIdentifier(subscription))
    }

    /// A consistent snapshot as a `snapshot` message, and its version.
    func snapshot(reset: Bool) -> (version: UInt64, json: [UInt8]) {
        let version = store.version
        if let cached = cachedSnapshot, cached.version == version, cached.reset == reset {
            return (version, cached.json)
        }
        let snapshot = store.snapshot()
        let json = PushEncoder.snapshot(snapshot, reset: reset, epoch: store.epoch)
        cachedSnapshot = (snapshot.version, reset, json)
        return (snapshot.version, json)
    }

    private func deliver(_ delivery: Receptionist.Delivery) {
        guard !subscriptions.isEmpty else { return }
        var delivered = 0
        for changeSet in delivery.changeSets {
            if changeSet.isReset {
                // A cluster replica was re-read whole: the versions in between are unknown, so
                // every subscriber starts again from a snapshot marked reset.
                let (version, json) = snapshot(reset: true)
                let event = PushEvent(name: "snapshot", id: version, json: json)
                for subscription in subscriptions.values {
                    subscription.reset(to: version)
                    subscription.sink.send(event)
                }
                continue
            }
            let event = PushEvent.changes(changeSet)
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
