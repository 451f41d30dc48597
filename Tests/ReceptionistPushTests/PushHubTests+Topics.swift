@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

/// Topic subscriptions through the hub: where a fresh one starts, resumes within and past the
/// history, another epoch, and a cluster node filling a resume from the log.
extension PushHubTests {
    // MARK: Topics

    @Test func aFreshTopicSubscriptionStartsAfterTheLastMessage() throws {
        let push = PushFixture()
        #expect(try push.hub.publish(topic: "t", data: json("one"), publishedAt: 10).get() == 1)
        #expect(try push.hub.publish(topic: "t", data: json("two"), publishedAt: 11).get() == 2)
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .topic("t"))
        #expect(sink.owed == ["subscribed t 2"])
        let epoch = push.hub.topic("t").epoch
        #expect(try sink.json(0) == ["type": "subscribed", "topic": "t", "seq": 2, "epoch": .string(epoch), "resumed": false])
        #expect(subscription.position == 2)

        #expect(try push.hub.publish(topic: "t", data: json(["x": 3]), publishedAt: 12).get() == 3)
        #expect(sink.trace == ["subscribed t 2", "message t 3"])
        #expect(sink.sent == ["message t 3"])
        #expect(try sink.json(1) == ["type": "message", "topic": "t", "seq": 3, "publishedAt": 12, "data": ["x": 3]])
        #expect(push.counters.topicPublishes == 3 && push.counters.deliveries == 1 && push.counters.topicResumes == 0)
        #expect(push.hub.topicSubscriberCount == 1)
    }

    @Test func aTopicResumeReplaysTheHistoryThenGoesLive() throws {
        let push = PushFixture()
        for n in 1...5 { _ = push.hub.publish(topic: "t", data: json(.number(JSONNumber(Double(n)))), publishedAt: 0) }
        let sink = FakeSink()
        try push.subscribe(sink, .topic("t"), since: 2)
        #expect(sink.trace == ["subscribed t 5 resumed", "message t 3", "message t 4", "message t 5"])
        #expect(sink.owed == ["subscribed t 5 resumed"])
        #expect(try sink.json(1)["data"] == 3)
        _ = push.hub.publish(topic: "t", data: json(6), publishedAt: 0)
        #expect(sink.trace.last == "message t 6" && sink.trace.count == 5)
        #expect(push.counters.topicResumes == 1 && push.counters.gaps == 0)

        let current = FakeSink()
        let subscription = try push.subscribe(current, .topic("t"), since: 6)
        #expect(current.trace == ["subscribed t 6 resumed"])
        #expect(subscription.position == 6)
        #expect(push.counters.topicResumes == 2)
    }

    @Test func aTopicNumberFromAnotherLifeIsNotResumedAndTheAnswerSaysSo() throws {
        let push = PushFixture()
        for n in 1...5 { _ = push.hub.publish(topic: "t", data: json(.number(JSONNumber(Double(n)))), publishedAt: 0) }
        let epoch = push.hub.topic("t").epoch
        // The same numbers in another epoch (a restarted gateway): nothing is replayed.
        let other = FakeSink()
        try push.subscribe(other, .topic("t"), since: 2, epoch: "another")
        #expect(other.trace == ["subscribed t 5"])
        #expect(try other.json(0) == ["type": "subscribed", "topic": "t", "seq": 5, "epoch": .string(epoch), "reset": true, "resumed": false])
        // A number the topic never reached, without an epoch.
        let ahead = FakeSink()
        try push.subscribe(ahead, .topic("t"), since: 9)
        #expect(try ahead.json(0)["reset"] == true)
        // The right epoch resumes.
        let same = FakeSink()
        try push.subscribe(same, .topic("t"), since: 4, epoch: epoch)
        #expect(same.trace == ["subscribed t 5 resumed", "message t 5"])
        #expect(push.counters.resets == 2 && push.counters.topicResumes == 1)
        _ = push.hub.publish(topic: "t", data: json(6), publishedAt: 0)
        #expect(other.trace.last == "message t 6" && ahead.trace.last == "message t 6")
    }

    @Test func aTopicResumePastTheHistoryReportsTheGapThenTheKeptMessages() throws {
        let push = PushFixture(topicHistory: 3)
        for n in 1...8 { _ = push.hub.publish(topic: "t", data: json(.number(JSONNumber(Double(n)))), publishedAt: 0) }
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .topic("t"), since: 2)
        #expect(sink.trace == ["subscribed t 8 resumed", "gap t 3...5", "message t 6", "message t 7", "message t 8"])
        #expect(sink.owed == ["subscribed t 8 resumed", "gap t 3...5"])
        #expect(try sink.json(1) == ["type": "gap", "topic": "t", "from": 3, "to": 5])
        // Numbered where the resume began and by the gap's end: an SSE reconnection after either
        // resumes from what the subscriber has, never past what it was not sent.
        #expect(sink.entries[0].event.id == 2 && sink.entries[1].event.id == 5)
        #expect(subscription.position == 8)
        #expect(push.counters.topicResumes == 1 && push.counters.gaps == 1)
    }

    @Test func aTopicResumeFromANumberNotYetReachedStartsOver() throws {
        let push = PushFixture()
        _ = push.hub.publish(topic: "t", data: json(1), publishedAt: 0)
        let sink = FakeSink()
        try push.subscribe(sink, .topic("t"), since: 7)  // an earlier life of the topic
        #expect(sink.trace == ["subscribed t 1"])
        _ = push.hub.publish(topic: "t", data: json(2), publishedAt: 0)
        #expect(sink.trace == ["subscribed t 1", "message t 2"])
        #expect(push.counters.topicResumes == 0 && push.counters.gaps == 0)
    }

    @Test func aClusterTopicSubscriptionWaitsUntilTheTopicIsSynced() throws {
        let push = PushFixture()
        let source = FakeTopicSource()
        push.hub.topicSource = source
        let fresh = FakeSink(), ahead = FakeSink(), gone = FakeSink()
        try push.subscribe(fresh, .topic("t"))
        try push.subscribe(ahead, .topic("t"), since: 4)
        let goneSubscription = try push.subscribe(gone, .topic("t"))
        let topic = push.hub.topic("t")
        #expect(source.watched == ["t"])
        #expect(!topic.isSynced && topic.pending.count == 3)
        #expect(fresh.trace.isEmpty && ahead.trace.isEmpty)

        push.hub.unsubscribe(goneSubscription)
        for seq: UInt64 in 1...2 { topic.mirror(seq: seq, publishedAt: 0, data: Array("\(seq)".utf8)) }
        push.hub.topicSynced(topic)
        #expect(fresh.trace == ["subscribed t 2"])
        #expect(ahead.trace == ["subscribed t 4 resumed"], "published through another node, on its way")
        #expect(gone.trace.isEmpty)
        #expect(push.hub.topicSubscriberCount == 2)

        for seq: UInt64 in 3...5 { topic.mirror(seq: seq, publishedAt: 0, data: Array("\(seq)".utf8)) }
        #expect(fresh.trace == ["subscribed t 2", "message t 3", "message t 4", "message t 5"])
        #expect(ahead.trace == ["subscribed t 4 resumed", "message t 5"])
        withExtendedLifetime(source) {}
    }

    /// Reads waiting for a cluster topic's first read are answered when it is synced, at most
    /// `maxSyncWaiters` of them: one more is refused at once, never kept.
    @Test func readsWaitingForAClusterTopicAreBounded() {
        let push = PushFixture()
        let source = FakeTopicSource()
        push.hub.topicSource = source
        let topic = push.hub.topic("t")
        var answered = 0
        for _ in 0..<PushHub.maxSyncWaiters { #expect(push.hub.whenSynced(topic) { answered += 1 }) }
        #expect(!push.hub.whenSynced(topic) { answered += 1 }, "one more than the bound")
        #expect(answered == 0)
        push.hub.topicSynced(topic)
        #expect(answered == PushHub.maxSyncWaiters)
        #expect(push.hub.whenSynced(topic) { answered += 1 } && answered == PushHub.maxSyncWaiters + 1, "synced: at once")
        withExtendedLifetime(source) {}
    }

    /// A cluster topic with history 3 on this node, messages 1...8 mirrored: 6...8 kept here.
    private func clusterTopic() -> (PushFixture, FakeTopicSource, Topic) {
        let push = PushFixture(topicHistory: 3)
        let source = FakeTopicSource()
        push.hub.topicSource = source
        let topic = push.hub.topic("t")
        for seq: UInt64 in 1...8 { topic.mirror(seq: seq, publishedAt: 0, data: Array("\(seq)".utf8)) }
        push.hub.topicSynced(topic)
        return (push, source, topic)
    }

    @Test func aResumeOlderThanTheNodesHistoryIsFilledFromTheLog() throws {
        let (push, source, topic) = clusterTopic()
        let sink = FakeSink()
        try push.subscribe(sink, .topic("t"), since: 2)
        // Nothing until the log answers; the lookup covers exactly what left this node.
        #expect(sink.trace.isEmpty)
        #expect(source.lookups.count == 1 && source.lookups[0].after == 2 && source.lookups[0].through == 5)
        // A message published meanwhile pushes 6 out of this node's history too: the log is asked
        // again for it, and nothing is lost or doubled.
        topic.mirror(seq: 9, publishedAt: 0, data: Array("9".utf8))
        source.answer([3, 4, 5])
        #expect(sink.trace.isEmpty)
        #expect(source.lookups.count == 1 && source.lookups[0].after == 5 && source.lookups[0].through == 6)
        source.answer([6])
        #expect(sink.trace == ["subscribed t 9 resumed"] + (3...9).map { "message t \($0)" })
        #expect(push.counters.gaps == 0 && push.counters.topicResumes == 1)
        topic.mirror(seq: 10, publishedAt: 0, data: Array("10".utf8))
        #expect(sink.trace.last == "message t 10")
    }

    @Test func onlyWhatTheLogNoLongerHoldsIsAGap() throws {
        let (push, source, _) = clusterTopic()
        let trimmed = FakeSink(), unreadable = FakeSink()
        try push.subscribe(trimmed, .topic("t"), since: 1)
        try push.subscribe(unreadable, .topic("t"), since: 1)
        // Redis trimmed 2 and 3; the other lookup failed (Redis down, or too slow).
        source.answer([4, 5])
        source.answer(nil)
        #expect(trimmed.trace == ["subscribed t 8 resumed", "gap t 2...3", "message t 4", "message t 5"] + (6...8).map { "message t \($0)" })
        #expect(unreadable.trace == ["subscribed t 8 resumed", "gap t 2...5"] + (6...8).map { "message t \($0)" })
        #expect(push.counters.gaps == 2)
    }

    @Test func aSubscriptionEndedWhileTheLogIsAskedNeverStarts() throws {
        let (push, source, topic) = clusterTopic()
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .topic("t"), since: 2)
        push.hub.unsubscribe(subscription)
        source.answer([3, 4, 5])
        #expect(sink.trace.isEmpty)
        #expect(topic.subscriberCount == 0 && topic.resuming.isEmpty)
    }

    /// The topic starts a new epoch while a resume waits for the log (Redis lost it): `since`
    /// numbered the old life, so the subscriber is reset into the new one, never resumed in it
    /// with the new life's messages up to `since` skipped unannounced.
    @Test func aResumeWhoseTopicRestartedMeanwhileIsReset() throws {
        let (push, source, topic) = clusterTopic()
        let sink = FakeSink()
        try push.subscribe(sink, .topic("t"), since: 4)
        #expect(source.lookups.count == 1)
        topic.restart(after: 1, epoch: "another life")
        for seq: UInt64 in 2...3 { topic.mirror(seq: seq, publishedAt: 0, data: Array("\(seq)".utf8)) }
        source.answer([5])
        #expect(sink.trace == ["subscribed t 3"], "answered as a fresh subscription, marked reset")
        #expect(push.counters.topicResumes == 0 && push.counters.resets == 1)
        topic.mirror(seq: 4, publishedAt: 0, data: Array("4".utf8))
        #expect(sink.trace.last == "message t 4", "the new life's message 4 is not taken for one already held")
    }

    @Test func aResumeInsideTheHistoryAsksNoLog() throws {
        let (push, source, _) = clusterTopic()
        let sink = FakeSink()
        try push.subscribe(sink, .topic("t"), since: 5)
        #expect(source.lookups.isEmpty)
        #expect(sink.trace == ["subscribed t 8 resumed", "message t 6", "message t 7", "message t 8"])
    }
}
