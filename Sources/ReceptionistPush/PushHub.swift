import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire

/// Every store feed and topic, and the one place a subscription starts: snapshot or replay
/// first, then the live stream, handed over by position so nothing is doubled or lost
/// (invariant 18).
///
/// It knows no socket: subscribers are `PushSink`s, time comes in as values, and change sets
/// arrive through receptionists on `context`.
///
/// The thread `context` runs its work on (the loop's) only.
public final class PushHub {
    public typealias Problem = ClientMessage.Problem

    private let stores: StoreRegistry
    private let context: any ExecutionContext
    private let historyLimit: Int
    /// The most bytes of messages a topic, or of encoded change sets a store's subscribers,
    /// keeps.
    private let historyBytes: Int
    /// How many messages the topic of a name keeps, and change sets a store's subscribers are
    /// encoded for (its namespace's); nil: `historyLimit` for every name. Set before use.
    public var historyOf: ((String) -> Int)?
    private let presenceSettings: PresenceSettings
    public private(set) var feeds: [String: StoreFeed] = [:]
    public private(set) var topics: [String: Topic] = [:]
    public let counters: PushCounters
    /// The cluster engine, when this hub is one node's replica of shared topics and stores.
    public weak var topicSource: (any TopicSource)?
    /// Cluster: what waits for a topic's first read (`whenSynced`), by topic.
    var syncWaiters: [ObjectIdentifier: [() -> Void]] = [:]
    /// Every presence this hub makes, and the cluster they share members through (set by the
    /// cluster engine as it starts).
    public let presenceRelay = PresenceRelay()
    /// The shared log of the cluster's stores; nil without a cluster.
    public weak var storeSource: (any StoreSource)?

    public init(
        stores: StoreRegistry, context: any ExecutionContext, historyLimit: Int, counters: PushCounters,
        presence: PresenceSettings = PresenceSettings(), historyBytes: Int = .max
    ) {
        self.historyBytes = historyBytes
        self.counters = counters
        self.stores = stores
        self.context = context
        self.historyLimit = historyLimit
        presenceSettings = presence
    }

    /// Set by `deferTopicFanOut`; nil while each message is handed out as it is published.
    private var fanOutQueue: FanOutQueue?

    /// From now on a topic hands its messages to its subscribers not as each is published but at
    /// `schedule`'s call of `fanOutDeferredTopics` (the gateway's: the end of the loop's turn,
    /// before its connections flush), all the messages of the turn together. `schedule` is called
    /// once for each turn that has messages.
    public func deferTopicFanOut(schedule: @escaping () -> Void) {
        let queue = FanOutQueue(schedule: schedule)
        fanOutQueue = queue
        for topic in topics.values { topic.fanOutQueue = queue }
    }

    /// Hands every topic's messages of this turn to its subscribers.
    public func fanOutDeferredTopics() {
        fanOutQueue?.run()
    }

    /// A cluster node: numbers ahead of it were given out elsewhere and are on their way.
    var isReplica: Bool { topicSource != nil }

    public var storeSubscriberCount: Int { feeds.values.reduce(0) { $0 + $1.subscriberCount } }
    public var storeGroupCount: Int { feeds.values.reduce(0) { $0 + $1.groupCount } }
    public var topicSubscriberCount: Int { topics.values.reduce(0) { $0 + $1.subscriberCount } }

    /// Whether `target` can be subscribed to; checked before an SSE stream commits to a 200.
    public func check(_ target: StreamTarget) -> Problem? {
        switch target {
        case .store(let name):
            Self.invalidName(target) ?? (stores.store(name) == nil ? Self.noSuchStore(name) : nil)
        case .topic:
            Self.invalidName(target)
        }
    }

    private static func noSuchStore(_ name: String) -> Problem {
        Problem(.noSuchStore, "no store named '\(name)'")
    }

    /// Why `target`'s name can never be a store's or a topic's, if it cannot.
    public static func invalidName(_ target: StreamTarget) -> Problem? {
        switch target {
        case .store(let name):
            StoreRegistry.isValidName(name) ? nil : Problem(.badMessage, StoreError.invalidStoreName(name).description)
        case .topic(let name):
            isValidTopicName(name)
                ? nil : Problem(.invalidTopic, "'\(name)' is not a valid topic name: use 1 to 64 of A-Z a-z 0-9 _ . -, not . or ..")
        }
    }

    /// Why `subscribe` would refuse `target` with `options` now, if it would: for a stream that
    /// must answer before it starts (SSE's head is a `200`).
    public func refusal(_ target: StreamTarget, options: SubscriptionOptions) -> Problem? {
        if let problem = check(target) { return problem }
        switch target {
        case .store(let name):
            // Looked up again: a job thread may have deleted the store since `check`.
            guard let store = stores.store(name) else { return Self.noSuchStore(name) }
            if feed(store).accepts(options) { return nil }
            return Problem(.tooManySubscriptions, "store '\(name)' already serves \(StoreFeed.maxGroups) distinct sets of subscription options")
        case .topic(let name):
            guard options.isNone else {
                return Problem(.badMessage, "\"models\", \"paths\", \"maxRate\" and \"old\" apply to store subscriptions")
            }
            // A subscriber makes a topic as a publish does, and is bounded as one is.
            return capacityRefusal(forTopic: name).map { Problem(.unavailable, $0) }
        }
    }

    /// Starts a subscription: sends its first messages through `sink`, then joins the live stream.
    /// `epoch`, when given, is the store's or topic's epoch `since` belongs to; another cannot be resumed.
    /// `options` narrow a store subscription; subscriptions with equal options share their work.
    /// With `presence`, the subscriber is sent the target's members, then their joins and leaves.
    /// `joinedAt` (microseconds since the Unix epoch) is when presence says it joined.
    public func subscribe(
        _ sink: any PushSink, to target: StreamTarget, since: UInt64?, epoch: String? = nil,
        options: SubscriptionOptions = .none, presence: Bool = false, joinedAt: UInt64 = 0
    ) -> Result<Subscription, Problem> {
        if let problem = refusal(target, options: options) { return .failure(problem) }
        switch target {
        case .store(let name):
            // Deleted on a job thread since `refusal` looked, the store is refused as missing.
            guard let store = stores.store(name) else { return .failure(Self.noSuchStore(name)) }
            let subscription = Subscription(target: target, sink: sink, options: options, joinedAt: joinedAt)
            if presence { subscription.presenceWatch = PresenceWatch() }
            subscribeStore(subscription, store, since: since, epoch: epoch)
            return .success(subscription)
        case .topic(let name):
            let subscription = Subscription(target: target, sink: sink, joinedAt: joinedAt)
            if presence { subscription.presenceWatch = PresenceWatch() }
            subscribeTopic(subscription, topic(name), since: since, epoch: epoch)
            return .success(subscription)
        }
    }

    /// Who subscribes to `target` on this node, or nil when nobody ever has (no members).
    public func presence(of target: StreamTarget) -> Presence? {
        switch target {
        case .store(let name):
            guard let feed = feeds[name], let store = stores.store(name), feed.store === store else { return nil }
            return feed.presence
        case .topic(let name):
            return topics[name]?.presence
        }
    }

    public func unsubscribe(_ subscription: Subscription) {
        switch subscription.target {
        case .store(let name): feeds[name]?.remove(subscription)
        case .topic(let name):
            guard let topic = topics[name] else { return }
            topic.remove(subscription)
            forgetIfUnused(topic)
        }
    }

    /// A topic that subscribing made, never published to, and followed by nobody now is
    /// forgotten, so that names a client only subscribes to hold no memory for good. (A
    /// cluster's topics are mirrored from Redis, and its presences still share the last leave:
    /// kept.)
    private func forgetIfUnused(_ topic: Topic) {
        guard topicSource == nil, presenceRelay.source == nil, topic.seq == 0, topic.subscriberCount == 0, topic.pending.isEmpty,
              topic.publishesInFlight == 0, topics[topic.name] === topic
        else { return }
        topics[topic.name] = nil
    }

    /// The most topics a publish may make; a publish to a new name past it is refused
    /// (`capacityRefusal`). Set before use.
    public var maxTopics = Int.max

    /// Why a publish or a subscribe may not make topic `name` now (there are `maxTopics`), or nil.
    public func capacityRefusal(forTopic name: String) -> String? {
        guard topics.count >= maxTopics, topics[name] == nil else { return nil }
        return capacityRefusal
    }

    /// Why a batch may not make the topics it names that do not exist yet (they would be more than
    /// `maxTopics`), or nil.
    public func capacityRefusal(forTopics names: some Sequence<String>) -> String? {
        var new = Set<String>()
        for name in names where topics[name] == nil { new.insert(name) }
        return new.isEmpty || topics.count + new.count <= maxTopics ? nil : capacityRefusal
    }

    private var capacityRefusal: String {
        "the gateway keeps \(maxTopics) topics, its limit: none is made until unused ones are forgotten; retry later"
    }

    /// Forgets every topic that nobody follows or publishes through now, and that has been quiet
    /// (no publish, no subscriber leaving) for `idle` microseconds before `now`: its history goes,
    /// and a subscriber that comes back later finds a new epoch (a `reset`), never old numbers
    /// meaning new messages. `release` lets the engine drop what it keeps of the topic first; a
    /// topic it cannot let go of now (false) is kept until the next call. Returns how many went.
    @discardableResult
    public func forgetIdleTopics(now: UInt64, idle: UInt64, release: (Topic) -> Bool) -> Int {
        var idleTopics: [Topic] = []
        for topic in topics.values where topic.isQuiet && topic.lastActive <= now &- idle && now >= idle {
            idleTopics.append(topic)
        }
        var forgotten = 0
        for topic in idleTopics where release(topic) {
            topics[topic.name] = nil
            syncWaiters[ObjectIdentifier(topic)] = nil
            forgotten += 1
        }
        counters.topicsForgotten += forgotten
        return forgotten
    }

    /// The store `name` was deleted (`store`, when known: a feed of a store made again under the
    /// name since is left alone): every subscriber is told (`unsubscribed`, reason `deleted`) and
    /// its feed closed. A store made again under the name is a new feed, in a new epoch.
    public func storeDeleted(_ name: String, store: ModelStore? = nil) {
        guard let feed = feeds[name], store.map({ feed.store === $0 }) ?? true else { return }
        feeds[name] = nil
        end(feed)
    }

    /// At shutdown, once every connection has gone and every job has ended: every store's groups
    /// stop observing, so no store's notification waits for the loop again. The disk engine's
    /// settling thread tells the stores of what it stored as it closes, while the loop waits for
    /// it: a receptionist full of undelivered change sets held it for the whole close time-out.
    public func closeFeeds() {
        for feed in feeds.values { feed.closeAll() }
        feeds.removeAll()
    }

    /// Tells every subscriber of `feed` that its store was deleted, and closes the feed.
    private func end(_ feed: StoreFeed) {
        let event = PushEvent(name: "unsubscribed", id: nil, json: PushEncoder.unsubscribed(.store(feed.store.name), reason: "deleted"))
        // Those still waiting for the shared log too: they are in no group yet.
        var members = Array(feed.resumingSubscriptions)
        feed.forEachMember { members.append($0) }
        feed.closeAll()
        for subscription in members {
            subscription.sink.sendOwed(event)
            subscription.sink.subscriptionEnded(subscription)
        }
    }

    /// Publishes `data` (JSON text, validated and compacted) to a topic, creating it on first use.
    /// `publishedAt` is in microseconds since the Unix epoch. Returns the message's sequence number.
    public func publish(topic name: String, data: [UInt8], publishedAt: UInt64) -> Result<UInt64, Problem> {
        if let problem = check(.topic(name)) { return .failure(problem) }
        return .success(topic(name).publish(data, publishedAt: publishedAt))
    }

    /// The topic named `name`, created on first use (and, in a cluster, mirrored from then on).
    public func topic(_ name: String) -> Topic {
        if let topic = topics[name] { return topic }
        let topic = Topic(
            name: name, historyLimit: historyOf?(name) ?? historyLimit, historyBytes: historyBytes, counters: counters, context: context,
            presence: presenceSettings,
            presenceRelay: presenceRelay)
        topic.fanOutQueue = fanOutQueue
        topics[name] = topic
        if let topicSource {
            topic.isSynced = false
            topicSource.watchTopic(name)
        }
        return topic
    }

    /// Cluster: the topic's stream has been read once; start the subscriptions that waited.
    public func topicSynced(_ topic: Topic) {
        topic.isSynced = true
        let waiting = topic.pending
        topic.pending = []
        for (subscription, since, epoch) in waiting {
            startTopic(subscription, topic, since: since, epoch: epoch)
        }
        if !syncWaiters.isEmpty, let waiters = syncWaiters.removeValue(forKey: ObjectIdentifier(topic)) {
            for waiter in waiters { waiter() }
        }
    }

    private func feed(_ store: ModelStore) -> StoreFeed {
        if let feed = feeds[store.name] {
            if feed.store === store { return feed }
            // The store under the name is another, deleted and made again before the delete
            // reached the loop: the old one's subscribers are told now.
            end(feed)
        }
        let feed = StoreFeed(
            store: store, context: context, historyLimit: historyOf?(store.name) ?? historyLimit, historyBytes: historyBytes, counters: counters,
            presence: presenceSettings,
            presenceRelay: presenceRelay)
        feeds[store.name] = feed
        return feed
    }

    private func subscribeStore(_ subscription: Subscription, _ store: ModelStore, since: UInt64?, epoch: String?) {
        let sink = subscription.sink
        let feed = feed(store)
        // The group's receptionist observes the store before its history is read for a replay:
        // a change set committed in between is then in one or the other, never in neither. A
        // group of options comes with its first member, so a resume may be what makes it.
        _ = feed.group(for: subscription.options)
        // A version from another epoch (the gateway restarted, or another store had the name), from
        // the future, or older than the history cannot be resumed: the client gets a fresh
        // snapshot marked reset. In a cluster a version ahead of this node's replica was committed
        // elsewhere and is on its way: the subscription resumes from it as the replica catches up.
        let sameEpoch = epoch == nil || epoch == store.epoch
        if let since, sameEpoch, since > store.version, isReplica {
            sink.sendOwed(storeSubscribed(store, since, subscription.options))
            counters.storeResumes += 1
            subscription.advance(to: since)
        } else if let since, sameEpoch, since <= store.version, let missed = store.changes(since: since) {
            return resumeStore(subscription, feed, since: since, replay: missed)
        } else if let since, sameEpoch, since < store.version, let storeSource {
            // Older than this replica's history: the shared log may still hold it. The
            // subscription starts when the log answers; until then nothing reaches it.
            return fillStore(subscription, feed, since: since, fetched: [], epoch: store.epoch, source: storeSource, rounds: 3)
        } else {
            return startStoreFresh(subscription, feed, reset: since != nil)
        }
        // Change sets up to `position` are covered; later ones reach the group and pass the filter.
        feed.add(subscription)
    }

    /// Resumes after `since` with `replay`, the change sets that followed it, oldest first; then
    /// the subscription joins the live stream.
    private func resumeStore(_ subscription: Subscription, _ feed: StoreFeed, since: UInt64, replay: [ChangeSet]) {
        subscription.sink.sendOwed(storeSubscribed(feed.store, since, subscription.options))
        counters.storeResumes += 1
        subscription.advance(to: since)
        // Through the group's filter and cadence; the events fanned out live, where the group
        // still has them, so a reconnect storm of resuming subscribers shares one encoding of
        // each change set (invariant 19).
        feed.group(for: subscription.options).replay(replay, to: subscription)
        feed.add(subscription)
    }

    /// The answer to a store resume from `since`.
    private func storeSubscribed(_ store: ModelStore, _ since: UInt64, _ options: SubscriptionOptions) -> PushEvent {
        PushEvent(
            name: "subscribed", id: nil, json: PushEncoder.subscribedStore(store.name, version: since, epoch: store.epoch, filter: options))
    }

    /// A (projected) snapshot, marked reset when the subscriber asked to resume and cannot.
    private func startStoreFresh(_ subscription: Subscription, _ feed: StoreFeed, reset: Bool) {
        let snapshot = feed.group(for: subscription.options).snapshot(reset: reset)
        if reset { counters.resets += 1 }
        subscription.sink.sendOwed(snapshot)
        subscription.advance(to: snapshot.id ?? 0)
        feed.add(subscription)
    }

    /// Reads the change sets after `since` that the replica's history no longer has from the
    /// shared log, then resumes from them and the history. A replica that moved past its history
    /// meanwhile is asked about again, at most `rounds` times in all; whatever the log no longer
    /// holds (or a new epoch, or a log that cannot be read) gives a reset snapshot instead, never
    /// a silent hole (invariant 43).
    private func fillStore(
        _ subscription: Subscription, _ feed: StoreFeed, since: UInt64, fetched: [ChangeSet], epoch: String,
        source: any StoreSource, rounds: Int
    ) {
        feed.startResuming(subscription)
        let after = fetched.last?.version ?? since
        let through = feed.store.version
        source.storeHistory(of: feed.store.name, after: after, through: through) { [weak self, weak feed] changeSets in
            guard let self, let feed, feed.endResuming(subscription) else { return }
            // Once this subscription has joined its group (or waits again): groups whose last
            // member left while it waited are closed, if nobody else waits.
            defer { feed.closeUnusedGroups() }
            guard feeds[feed.store.name] === feed else {
                // The store was made anew meanwhile: resume against the one there is now.
                if let store = stores.store(feed.store.name) { subscribeStore(subscription, store, since: since, epoch: epoch) }
                return
            }
            var all = fetched
            var whole = changeSets != nil && feed.store.epoch == epoch
            for changeSet in changeSets ?? [] where whole {
                whole = changeSet.version == (all.last?.version ?? since) + 1
                if whole { all.append(changeSet) }
            }
            guard whole, (all.last?.version ?? since) == through else { return startStoreFresh(subscription, feed, reset: true) }
            if let missed = feed.store.changes(since: through) {
                resumeStore(subscription, feed, since: since, replay: all + missed)
            } else if rounds > 1 {
                fillStore(subscription, feed, since: since, fetched: all, epoch: epoch, source: source, rounds: rounds - 1)
            } else {
                startStoreFresh(subscription, feed, reset: true)
            }
        }
    }

    public static func isValidTopicName(_ name: String) -> Bool {
        StoreRegistry.isValidName(name)
    }
}
