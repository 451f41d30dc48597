import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistWire

/// Every store feed and topic on the loop, and the one place a subscription starts: snapshot or
/// replay first, then the live stream, handed over by position so nothing is doubled or lost.
///
/// Loop thread only.
final class PushHub {
    typealias Problem = ClientMessage.Problem

    private let stores: StoreRegistry
    private let loop: EventLoop
    private let context: LoopExecutionContext
    private let historyLimit: Int
    private(set) var feeds: [String: StoreFeed] = [:]
    private(set) var topics: [String: Topic] = [:]
    let counters: GatewayCounters
    /// The `redis` engine, when the gateway runs as one node of a cluster.
    var cluster: ClusterEngine?

    init(stores: StoreRegistry, loop: EventLoop, historyLimit: Int, counters: GatewayCounters) {
        self.counters = counters
        self.stores = stores
        self.loop = loop
        self.historyLimit = historyLimit
        context = LoopExecutionContext(loop: loop)
    }

    /// Whether `target` can be subscribed to; checked before an SSE stream commits to a 200.
    func check(_ target: StreamTarget) -> Problem? {
        switch target {
        case .store(let name):
            stores.store(name) == nil ? Problem("no_such_store", "no store named '\(name)'") : nil
        case .topic(let name):
            Self.isValidTopicName(name) ? nil : Problem("invalid_topic", "'\(name)' is not a valid topic name: use 1 to 64 of A-Z a-z 0-9 _ . -")
        }
    }

    /// Starts a subscription: sends its first messages through `sink`, then joins the live stream.
    /// `epoch`, when given, is the store epoch `since` belongs to; another epoch cannot be resumed.
    func subscribe(_ sink: any PushSink, to target: StreamTarget, since: UInt64?, epoch: String? = nil) -> Result<Subscription, Problem> {
        if let problem = check(target) { return .failure(problem) }
        switch target {
        case .store(let name):
            return .success(subscribeStore(sink, stores.store(name)!, since: since, epoch: epoch))
        case .topic(let name):
            return .success(subscribeTopic(sink, topic(name), since: since))
        }
    }

    func unsubscribe(_ subscription: Subscription) {
        switch subscription.target {
        case .store(let name): feeds[name]?.remove(subscription)
        case .topic(let name): topics[name]?.remove(subscription)
        }
    }

    /// Publishes to a topic, creating it on first use. Returns the message's sequence number.
    func publish(topic name: String, data: JSONValue) -> Result<UInt64, Problem> {
        if let problem = check(.topic(name)) { return .failure(problem) }
        return .success(topic(name).publish(data))
    }

    func topic(_ name: String) -> Topic {
        if let topic = topics[name] { return topic }
        let topic = Topic(name: name, historyLimit: historyLimit, counters: counters)
        topics[name] = topic
        if let cluster {
            topic.isSynced = false
            cluster.watchTopic(name)
        }
        return topic
    }

    /// Cluster: the topic's stream has been read once; start the subscriptions that waited.
    func topicSynced(_ topic: Topic) {
        topic.isSynced = true
        let waiting = topic.pending
        topic.pending = []
        for (subscription, since) in waiting {
            startTopic(subscription, topic, since: since)
        }
    }

    private func feed(_ store: ModelStore) -> StoreFeed {
        if let feed = feeds[store.name], feed.store === store { return feed }
        let feed = StoreFeed(store: store, loop: loop, context: context, counters: counters)
        feeds[store.name] = feed
        return feed
    }

    private func subscribeStore(_ sink: any PushSink, _ store: ModelStore, since: UInt64?, epoch: String?) -> Subscription {
        let feed = feed(store)
        let subscription = Subscription(target: .store(store.name), sink: sink, position: 0)
        // A version from another epoch (the gateway restarted, or another store had the name), from
        // the future, or older than the history cannot be resumed: the client gets a fresh
        // snapshot marked reset. In a cluster a version ahead of this node's replica was committed
        // elsewhere and is on its way: the subscription resumes from it as the replica catches up.
        let sameEpoch = epoch == nil || epoch == store.epoch
        if let since, sameEpoch, since > store.version, cluster != nil {
            sink.send(PushEvent(name: "subscribed", id: nil, json: PushEncoder.subscribedStore(store.name, version: since, epoch: store.epoch)))
            counters.storeResumes += 1
            subscription.advance(to: since)
        } else if let since, sameEpoch, since <= store.version, let missed = store.changes(since: since) {
            sink.send(PushEvent(name: "subscribed", id: nil, json: PushEncoder.subscribedStore(store.name, version: since, epoch: store.epoch)))
            counters.storeResumes += 1
            subscription.advance(to: since)
            for changeSet in missed {
                subscription.deliver(PushEvent.changes(changeSet))
            }
        } else {
            let (version, json) = feed.snapshot(reset: since != nil)
            if since != nil { counters.resets += 1 }
            sink.send(PushEvent(name: "snapshot", id: version, json: json))
            subscription.advance(to: version)
        }
        // Change sets up to `position` are covered; later ones reach the feed and pass the filter.
        feed.add(subscription)
        return subscription
    }

    private func subscribeTopic(_ sink: any PushSink, _ topic: Topic, since: UInt64?) -> Subscription {
        let subscription = Subscription(target: .topic(topic.name), sink: sink, position: 0)
        if topic.isSynced {
            startTopic(subscription, topic, since: since)
        } else {
            topic.pending.append((subscription, since))
        }
        return subscription
    }

    private func startTopic(_ subscription: Subscription, _ topic: Topic, since: UInt64?) {
        let sink = subscription.sink
        // A number past the topic's last one belongs to an earlier life of the topic: not resumable.
        // In a cluster it was published through another node and is on its way here: resume from it.
        if let since, since > topic.seq, cluster != nil {
            sink.send(PushEvent(name: "subscribed", id: nil, json: PushEncoder.subscribedTopic(topic.name, seq: since, resumed: true)))
            subscription.advance(to: since)
        } else if let since, since <= topic.seq {
            sink.send(PushEvent(name: "subscribed", id: nil, json: PushEncoder.subscribedTopic(topic.name, seq: topic.seq, resumed: true)))
            counters.topicResumes += 1
            subscription.advance(to: since)
            let (gap, events) = topic.replay(after: since)
            if let gap {
                counters.gaps += 1
                sink.send(PushEvent(name: "gap", id: nil, json: PushEncoder.gap(topic: topic.name, from: gap.lowerBound, to: gap.upperBound)))
                subscription.advance(to: gap.upperBound)
            }
            for event in events {
                subscription.deliver(event)
            }
        } else {
            sink.send(PushEvent(name: "subscribed", id: nil, json: PushEncoder.subscribedTopic(topic.name, seq: topic.seq, resumed: false)))
            subscription.advance(to: topic.seq)
        }
        topic.add(subscription)
    }

    static func isValidTopicName(_ name: String) -> Bool {
        StoreRegistry.isValidName(name)
    }
}
