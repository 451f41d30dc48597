import ReceptionistModel
import ReceptionistWire

/// A named stream of published messages with sequence numbers 1, 2, 3 … and a history ring.
///
/// Invariants: sequence numbers are gapless; the ring holds the newest `historyLimit` messages;
/// a replay never skips a message silently: what has left the ring is reported as one gap.
///
/// Loop thread only.
public final class Topic: PresenceMembers {
    public let name: String
    public private(set) var seq: UInt64 = 0
    /// The topic's life: a number resumes only within the epoch it was given in. A new one is made
    /// with the topic; a cluster topic takes its log's (`adopt`), and a new one when the log was
    /// lost (`restart`).
    public private(set) var epoch: String
    private var history: HistoryRing<PushEvent>
    private var subscriptions = MemberList()
    /// Cluster: false until this node has read the topic's stream from Redis once. Subscriptions
    /// that arrive before wait in `pending` (with their `since`), so none starts from a partial
    /// history.
    public internal(set) var isSynced = true
    var pending: [(subscription: Subscription, since: UInt64?, epoch: String?)] = []
    /// Cluster: resumes waiting for the shared log to fill in what left this node's history.
    var resuming: Set<ObjectIdentifier> = []
    /// Where the topic waits for its deferred fan-out (the end of the loop's iteration), or nil
    /// to hand each message to the subscribers as it is published.
    var fanOutQueue: FanOutQueue?
    /// Publishes an engine was handed and has not answered yet (the disk's): a topic with any is
    /// never forgotten (`PushHub.forgetIfUnused`), or the message would land in a topic no
    /// subscriber finds.
    public var publishesInFlight = 0
    /// Messages numbered and kept in the history but not yet handed to the subscribers: at most
    /// what one turn of the loop published, since the queue runs at the end of every turn.
    private var unsent: [PushEvent] = []
    /// When (microseconds since the Unix epoch) the topic was last published to, or last left by
    /// its last subscriber, or made: a topic quiet for `--topic-ttl` since is forgotten
    /// (`PushHub.forgetIdleTopics`).
    public internal(set) var lastActive: UInt64

    private let counters: PushCounters
    private let context: any ExecutionContext
    private let presenceSettings: PresenceSettings
    /// Who subscribes, made with the first subscriber.
    public private(set) lazy var presence = Presence(
        target: .topic(name), members: self, context: context, settings: presenceSettings, counters: counters,
        relay: presenceRelay)
    /// The cluster's presence, when there is one.
    private let presenceRelay: PresenceRelay?

    public init(
        name: String, historyLimit: Int, historyBytes: Int = .max, counters: PushCounters, context: any ExecutionContext,
        presence: PresenceSettings = PresenceSettings(), epoch: String = ModelStore.newEpoch(),
        presenceRelay: PresenceRelay? = nil
    ) {
        self.presenceRelay = presenceRelay
        self.name = name
        self.epoch = epoch
        self.counters = counters
        self.context = context
        presenceSettings = presence
        history = HistoryRing(capacity: historyLimit, maxBytes: historyBytes)
        lastActive = Clock.microsecondsSinceEpoch()
    }

    public var historyLimit: Int { history.capacity }
    public var subscriberCount: Int { subscriptions.count }

    /// Whether nothing holds the topic: no subscriber (nor one waiting to start or to resume), no
    /// publish waiting for an engine, nothing waiting for the fan-out.
    var isQuiet: Bool {
        subscriptions.count == 0 && pending.isEmpty && resuming.isEmpty && publishesInFlight == 0 && unsent.isEmpty
    }

    func forEachMember(_ body: (Subscription) -> Void) {
        for subscription in subscriptions { body(subscription) }
    }

    /// Starts `subscription`'s live stream, and makes it a member of the presence.
    func add(_ subscription: Subscription) {
        subscriptions.insert(subscription)
        presence.joined(subscription)
    }

    func remove(_ subscription: Subscription) {
        if subscriptions.remove(subscription) {
            presence.left(subscription)
            if subscriptions.count == 0 { lastActive = Clock.microsecondsSinceEpoch() }
        }
        pending.removeAll { $0.subscription === subscription }
        resuming.remove(ObjectIdentifier(subscription))
    }

    /// Sequences `data` (JSON text, validated and compacted by the caller), published at
    /// `publishedAt` (microseconds since the Unix epoch), keeps it in the history and hands it to
    /// every subscriber. Returns its number.
    public func publish(_ data: [UInt8], publishedAt: UInt64) -> UInt64 {
        seq += 1
        lastActive = publishedAt
        let json = PushEncoder.message(topic: name, seq: seq, publishedAt: publishedAt, data: data)
        record(PushEvent(name: "message", id: seq, epoch: epoch, json: json))
        return seq
    }

    /// Cluster: appends the next message as Redis numbered it (`seq` is one above the last);
    /// `data` is JSON text.
    public func mirror(seq: UInt64, publishedAt: UInt64, data: [UInt8]) {
        self.seq = seq
        lastActive = publishedAt
        let json = PushEncoder.message(topic: name, seq: seq, publishedAt: publishedAt, data: data)
        record(PushEvent(name: "message", id: seq, epoch: epoch, json: json))
    }

    /// Cluster: messages `from...to` left Redis before this node read them. The history restarts
    /// after them (so a replay reports them as a gap) and every subscriber is told now.
    public func skip(from: UInt64, to: UInt64) {
        fanOutUnsent()
        history.removeAll()
        seq = to
        for subscription in subscriptions {
            subscription.gap(from: from, to: to, epoch: epoch)
        }
    }

    /// The topic as a durable engine kept it, at start, before anyone subscribed: its epoch, its
    /// number and its newest messages (oldest first).
    public func restore(epoch: String, seq: UInt64, entries: [TopicEntry]) {
        self.epoch = epoch
        self.seq = seq
        history.removeAll()
        for entry in entries where entry.seq <= seq {
            let event = event(entry)
            history.append(event, number: entry.seq, size: event.json.count)
        }
        if let newest = entries.last { lastActive = newest.publishedAt }
    }

    /// Cluster: the log's epoch, taken before anyone subscribed (the topic is not synced yet).
    public func adopt(epoch: String) {
        self.epoch = epoch
    }

    /// Cluster: the log was lost and started again (Redis lost its data, or came back with older
    /// data) in `epoch`, after number `base`. The history is dropped, and every subscriber is told
    /// with a `reset` that the numbering starts over, never moved back silently; the messages of
    /// the new epoch follow.
    public func restart(after base: UInt64, epoch: String) {
        fanOutUnsent()
        history.removeAll()
        self.epoch = epoch
        seq = base
        let reset = PushEvent(name: "reset", id: nil, json: PushEncoder.topicReset(name, seq: base, epoch: epoch))
        for subscription in subscriptions {
            subscription.sink.sendOwed(reset)
            subscription.reset(to: base)
        }
        counters.resets += subscriptions.count
    }

    private func record(_ event: PushEvent) {
        history.append(event, number: seq, size: event.json.count)
        counters.topicPublishes += 1
        guard let fanOutQueue else { return fanOut(event) }
        if unsent.isEmpty {
            fanOutQueue.add(self)
            // Room for a run, not grown one message at a time (a cluster node mirrors a whole
            // script call's messages at once).
            unsent.reserveCapacity(16)
        }
        unsent.append(event)
    }

    /// Hands what was published since the last fan-out to every subscriber, all of it at once: one
    /// walk of the subscribers, and one buffer for each (`PushEvent.run`). Anything the topic
    /// sends outside a fan-out (a gap, a reset) calls this first, so it follows what was published
    /// before it (invariant 47).
    func fanOutUnsent() {
        guard !unsent.isEmpty else { return }
        let event = unsent.count == 1 ? unsent[0] : PushEvent(run: unsent)
        unsent = []
        fanOut(event)
    }

    private func fanOut(_ event: PushEvent) {
        var delivered = 0
        // Whether it is a run is asked once, not of every subscriber.
        if event.run.isEmpty {
            for subscription in subscriptions where subscription.deliver(event) {
                delivered += 1
            }
        } else {
            for subscription in subscriptions {
                delivered += subscription.deliver(run: event)
            }
        }
        counters.deliveries += delivered
    }

    /// A message read back from the shared log, for one resume: encoded as a live one is.
    public func event(_ entry: TopicEntry) -> PushEvent {
        PushEvent(
            name: "message", id: entry.seq, epoch: epoch,
            json: PushEncoder.message(topic: name, seq: entry.seq, publishedAt: entry.publishedAt, data: entry.data))
    }

    /// The messages after `since` that are still kept, and the range of those that are not.
    public func replay(after since: UInt64) -> (gap: ClosedRange<UInt64>?, events: [PushEvent]) {
        let (missing, events) = history.after(since, latest: seq)
        return (missing, events)
    }
}
