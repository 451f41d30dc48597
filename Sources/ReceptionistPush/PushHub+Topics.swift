import ReceptionistModel

/// Topics: a subscription's start (fresh, resumed from the history or, in a cluster, from the
/// shared log), and forgetting the topics nobody uses any more.
extension PushHub {
    func subscribeTopic(_ subscription: Subscription, _ topic: Topic, since: UInt64?, epoch: String?) {
        if topic.isSynced {
            startTopic(subscription, topic, since: since, epoch: epoch)
        } else {
            topic.pending.append((subscription, since, epoch))
        }
    }

    func startTopic(_ subscription: Subscription, _ topic: Topic, since: UInt64?, epoch: String?) {
        let sink = subscription.sink
        // A number from another epoch, or past the topic's last one (without a cluster), belongs to
        // another life of the topic: not resumable, and the answer says so. In a cluster a number
        // ahead was published through another node and is on its way here: resume from it.
        if since != nil, let epoch, epoch != topic.epoch {
            startFresh(subscription, topic)
            return
        } else if let since, since > topic.seq, isReplica {
            sink.sendOwed(subscribed(topic, seq: since, resumed: true))
            subscription.advance(to: since)
        } else if let since, since <= topic.seq {
            let (gap, _) = topic.replay(after: since)
            if let gap, let topicSource {
                // Older than this node's history: the shared log may still hold it. The
                // subscription starts when the log answers; until then nothing reaches it.
                fill(subscription, topic, since: since, fetched: [], through: gap.upperBound, source: topicSource, rounds: 3)
                return
            }
            resumeTopic(subscription, topic, since: since, fetched: [])
            return
        } else if since != nil {
            startFresh(subscription, topic)
            return
        } else {
            sink.sendOwed(subscribed(topic, seq: topic.seq, resumed: false))
            subscription.advance(to: topic.seq)
        }
        topic.add(subscription)
    }

    /// A `since` that cannot be resumed: the messages after the last one follow, and the answer
    /// is marked `reset` so the client knows its number meant nothing here.
    func startFresh(_ subscription: Subscription, _ topic: Topic) {
        counters.resets += 1
        subscription.sink.sendOwed(subscribed(topic, seq: topic.seq, resumed: false, reset: true))
        subscription.advance(to: topic.seq)
        topic.add(subscription)
    }

    /// Asks the shared log for what left this node's history after `since` (beyond `fetched`, up
    /// to `through`). Messages that arrive meanwhile may push more out of the history; then the
    /// log is asked again for those, at most `rounds` times in all, and a gap covers the rest.
    func fill(
        _ subscription: Subscription, _ topic: Topic, since: UInt64, fetched: [TopicEntry], through: UInt64,
        source: any TopicSource, rounds: Int
    ) {
        let key = ObjectIdentifier(subscription)
        topic.resuming.insert(key)
        let after = fetched.last?.seq ?? since
        let epoch = topic.epoch
        source.history(of: topic.name, after: after, through: through) { [weak self, weak topic] entries in
            guard let self, let topic, topic.resuming.remove(key) != nil else { return }
            // The topic started a new epoch meanwhile (`restart`): `since` numbers another life of
            // it, and what was read back belongs to that life. A reset, as for a stale epoch.
            guard topic.epoch == epoch else { return startFresh(subscription, topic) }
            let all = fetched + (entries ?? [])
            if entries != nil, rounds > 1, let gap = topic.replay(after: since).gap, gap.upperBound > through {
                return fill(subscription, topic, since: since, fetched: all, through: gap.upperBound, source: source, rounds: rounds - 1)
            }
            resumeTopic(subscription, topic, since: since, fetched: all)
        }
    }

    /// Replays what followed `since`: from `fetched` (read back from the shared log) where this
    /// node's history no longer has it, then from the history; a `gap` covers only what neither
    /// holds. Then the subscription joins the live stream.
    func resumeTopic(_ subscription: Subscription, _ topic: Topic, since: UInt64, fetched: [TopicEntry]) {
        // Numbered `since`, not the topic's last number: an `EventSource` that reconnects before
        // the replay reaches it asks again from where it was, never from past what it missed.
        subscription.sink.sendOwed(subscribed(topic, seq: topic.seq, resumed: true, id: since))
        counters.topicResumes += 1
        subscription.advance(to: since)
        let (gap, events) = topic.replay(after: since)
        if let gap {
            for entry in fetched where entry.seq > subscription.position && entry.seq <= gap.upperBound {
                if entry.seq > subscription.position + 1 {
                    counters.gaps += 1
                    subscription.gap(from: subscription.position + 1, to: entry.seq - 1, epoch: topic.epoch)
                }
                subscription.deliver(topic.event(entry))
            }
            if subscription.position < gap.upperBound {
                counters.gaps += 1
                subscription.gap(from: subscription.position + 1, to: gap.upperBound, epoch: topic.epoch)
            }
        }
        for event in events {
            subscription.deliver(event)
        }
        topic.add(subscription)
    }

    /// `id`, the SSE `id:`, is `seq` unless given: where the subscriber has everything up to.
    func subscribed(_ topic: Topic, seq: UInt64, resumed: Bool, reset: Bool = false, id: UInt64? = nil) -> PushEvent {
        // Numbered, so an `EventSource` that reconnects before any message resumes after it.
        PushEvent(
            name: "subscribed", id: id ?? seq, epoch: topic.epoch,
            json: PushEncoder.subscribedTopic(topic.name, seq: seq, epoch: topic.epoch, resumed: resumed, reset: reset))
    }

    /// Cluster: runs `done` once `topic` has been read from the shared log (`topicSynced`), at
    /// once if it has: a read of a topic this node did not follow waits for it. The caller bounds
    /// the wait; a topic forgotten first drops what waited. At most `maxSyncWaiters` wait for one
    /// topic (reads that came while Redis did not answer): past it, false and no call.
    @discardableResult
    public func whenSynced(_ topic: Topic, _ done: @escaping () -> Void) -> Bool {
        if topic.isSynced {
            done()
            return true
        }
        let key = ObjectIdentifier(topic)
        guard syncWaiters[key, default: []].count < Self.maxSyncWaiters else { return false }
        syncWaiters[key, default: []].append(done)
        return true
    }

    public static let maxSyncWaiters = 256
}
