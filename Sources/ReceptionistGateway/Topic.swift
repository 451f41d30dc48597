import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire

/// A named stream of published messages with sequence numbers 1, 2, 3 … and a history ring.
///
/// Invariants: sequence numbers are gapless; the ring holds the newest `historyLimit` messages,
/// oldest first from `start`; a replay never skips a message silently: what has left the ring is
/// reported as one gap.
///
/// Loop thread only.
final class Topic {
    let name: String
    let historyLimit: Int
    private(set) var seq: UInt64 = 0
    private var ring: [PushEvent] = []
    private var start = 0
    private var subscriptions: [ObjectIdentifier: Subscription] = [:]
    /// Cluster: false until this node has read the topic's stream from Redis once. Subscriptions
    /// that arrive before wait in `pending` (with their `since`), so none starts from a partial
    /// history.
    var isSynced = true
    var pending: [(subscription: Subscription, since: UInt64?)] = []

    private let counters: GatewayCounters

    init(name: String, historyLimit: Int, counters: GatewayCounters) {
        self.name = name
        self.counters = counters
        self.historyLimit = max(0, historyLimit)
    }

    var subscriberCount: Int { subscriptions.count }

    func add(_ subscription: Subscription) {
        subscriptions[ObjectIdentifier(subscription)] = subscription
    }

    func remove(_ subscription: Subscription) {
        subscriptions.removeValue(forKey: ObjectIdentifier(subscription))
        pending.removeAll { $0.subscription === subscription }
    }

    /// Sequences `data`, keeps it in the history and hands it to every subscriber. Returns its number.
    func publish(_ data: JSONValue) -> UInt64 {
        seq += 1
        let json = PushEncoder.message(topic: name, seq: seq, publishedAt: Clock.microsecondsSinceEpoch(), data: data)
        record(PushEvent(name: "message", id: seq, json: json))
        return seq
    }

    /// Cluster: the next message as Redis numbered it (`seq` is one above the last); `data` is JSON.
    func deliver(seq: UInt64, publishedAt: UInt64, data: [UInt8]) {
        self.seq = seq
        let json = PushEncoder.message(topic: name, seq: seq, publishedAt: publishedAt, rawData: data)
        record(PushEvent(name: "message", id: seq, json: json))
    }

    /// Cluster: messages `from...to` left Redis before this node read them. The ring restarts after
    /// them (so a replay reports them as a gap) and every subscriber is told now.
    func skip(from: UInt64, to: UInt64) {
        ring.removeAll()
        start = 0
        seq = to
        for subscription in subscriptions.values {
            subscription.gap(from: from, to: to)
        }
    }

    /// Cluster: Redis restarted the numbering (it lost its data). The history is dropped and the
    /// topic goes on from `seq`; subscribers ahead of it are moved back so they get what follows.
    func restart(seq: UInt64, publishedAt: UInt64, data: [UInt8]) {
        ring.removeAll()
        start = 0
        for subscription in subscriptions.values {
            subscription.reset(to: seq - 1)
        }
        deliver(seq: seq, publishedAt: publishedAt, data: data)
    }

    private func record(_ event: PushEvent) {
        if historyLimit > 0 {
            if ring.count < historyLimit {
                ring.append(event)
            } else {
                ring[start] = event
                start = (start + 1) % historyLimit
            }
        }
        var delivered = 0
        for subscription in subscriptions.values where subscription.deliver(event) {
            delivered += 1
        }
        counters.deliveries += delivered
        counters.topicPublishes += 1
    }

    /// The messages after `since` that are still kept, and the range of those that are not.
    func replay(after since: UInt64) -> (gap: ClosedRange<UInt64>?, events: [PushEvent]) {
        guard since < seq else { return (nil, []) }
        let oldest = ring.isEmpty ? seq + 1 : ring[start].id!
        let gap: ClosedRange<UInt64>? = since + 1 < oldest ? (since + 1)...(oldest - 1) : nil
        var events: [PushEvent] = []
        for i in 0..<ring.count {
            let event = ring[(start + i) % ring.count]
            if event.id! > since { events.append(event) }
        }
        return (gap, events)
    }
}
