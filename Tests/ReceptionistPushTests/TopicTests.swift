@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistTestSupport
import Testing

@Suite struct TopicTests {
    private func topic(history: Int, published: Int) -> Topic {
        let topic = Topic(name: "t", historyLimit: history, counters: PushCounters(), context: ManualContext())
        for i in 0..<published {
            #expect(topic.publish(json(.number(JSONNumber(Double(i)))), publishedAt: UInt64(i)) == UInt64(i + 1))
        }
        return topic
    }

    @Test func replayGivesWhatIsKeptAndNamesWhatIsNot() {
        let topic = topic(history: 5, published: 12)
        let (gap, events) = topic.replay(after: 3)
        #expect(gap == 4...7)
        #expect(events.map(\.id) == [8, 9, 10, 11, 12])
    }

    @Test func replayInsideTheHistoryHasNoGap() {
        let topic = topic(history: 5, published: 12)
        let (gap, events) = topic.replay(after: 9)
        #expect(gap == nil)
        #expect(events.map(\.id) == [10, 11, 12])
        #expect(topic.replay(after: 12).events.isEmpty)
        #expect(topic.replay(after: 7).gap == nil)
        #expect(topic.replay(after: 6).gap == 7...7)
    }

    @Test func withoutHistoryEverythingMissedIsAGap() {
        let topic = topic(history: 0, published: 4)
        let (gap, events) = topic.replay(after: 1)
        #expect(gap == 2...4)
        #expect(events.isEmpty)
    }

    /// A topic that only subscribing made is forgotten when its last subscriber goes, so names a
    /// client subscribes to and leaves hold no memory; one published to, or with a publish still
    /// being stored, is kept. (Every name subscribed to stayed, about 1.6 KB each, for good.)
    @Test func aTopicOnlySubscribedToIsForgottenWithItsLastSubscriber() throws {
        let push = PushFixture()
        let first = FakeSink(), second = FakeSink()
        let one = try push.subscribe(first, .topic("idle"))
        let two = try push.subscribe(second, .topic("idle"))
        push.hub.unsubscribe(one)
        #expect(push.hub.topics["idle"] != nil, "a subscriber is left")
        push.hub.unsubscribe(two)
        #expect(push.hub.topics["idle"] == nil)

        let third = FakeSink(), fourth = FakeSink()
        let published = try push.subscribe(third, .topic("used"))
        _ = push.hub.publish(topic: "used", data: json(1), publishedAt: 0)
        push.hub.unsubscribe(published)
        #expect(push.hub.topics["used"]?.seq == 1)

        let storing = try push.subscribe(fourth, .topic("storing"))
        push.hub.topic("storing").publishesInFlight = 1
        push.hub.unsubscribe(storing)
        #expect(push.hub.topics["storing"] != nil)
        withExtendedLifetime((first, second, third, fourth)) {}
    }

    // MARK: Through subscriptions

    @discardableResult
    private func subscribe(_ topic: Topic, _ sink: FakeSink, at position: UInt64) -> Subscription {
        let subscription = Subscription(target: .topic(topic.name), sink: sink, position: position)
        topic.add(subscription)
        return subscription
    }

    @Test func theRingKeepsTheNewestMessages() {
        let topic = topic(history: 3, published: 5)
        #expect(topic.historyLimit == 3 && topic.seq == 5)
        let (gap, events) = topic.replay(after: 0)
        #expect(gap == 1...2)
        #expect(events.map(\.id) == [3, 4, 5])
        #expect(events.map(FakeSink.describe) == ["message t 3", "message t 4", "message t 5"])
        #expect(topic.replay(after: 5).gap == nil && topic.replay(after: 5).events.isEmpty)
    }

    @Test func aMessageReachesEverySubscriberThatHasNotHadIt() {
        let counters = PushCounters()
        let topic = Topic(name: "t", historyLimit: 10, counters: counters, context: ManualContext())
        let a = FakeSink(), b = FakeSink(), ahead = FakeSink()
        let subscriptions = [subscribe(topic, a, at: 0), subscribe(topic, b, at: 0), subscribe(topic, ahead, at: 1)]
        #expect(topic.subscriberCount == 3)
        #expect(topic.publish(json("x"), publishedAt: 1) == 1)
        #expect(topic.publish(json("y"), publishedAt: 2) == 2)
        #expect(a.trace == ["message t 1", "message t 2"] && b.trace == a.trace)
        #expect(ahead.trace == ["message t 2"])
        #expect(subscriptions.map(\.position) == [2, 2, 2])
        #expect(counters.deliveries == 5 && counters.topicPublishes == 2)

        topic.remove(subscriptions[1])
        _ = topic.publish(json("z"), publishedAt: 3)
        #expect(b.trace.count == 2 && a.trace.last == "message t 3")
    }

    @Test func skipReportsTheLostMessagesAsAGapToEachSubscriber() {
        let topic = topic(history: 10, published: 3)
        let current = FakeSink(), ahead = FakeSink(), further = FakeSink()
        subscribe(topic, current, at: 3)
        subscribe(topic, ahead, at: 5)  // resumed from a number published through another node
        subscribe(topic, further, at: 9)
        topic.skip(from: 4, to: 7)
        #expect(current.owed == ["gap t 4...7"])
        #expect(ahead.owed == ["gap t 6...7"])
        #expect(further.trace.isEmpty, "it already had everything up to 9")
        #expect(topic.seq == 7)
        let (gap, events) = topic.replay(after: 2)
        #expect(gap == 3...7 && events.isEmpty, "the history restarts after the skipped messages")

        topic.mirror(seq: 8, publishedAt: 0, data: Array("8".utf8))
        #expect(current.trace == ["gap t 4...7", "message t 8"])
        #expect(ahead.trace == ["gap t 6...7", "message t 8"])
        #expect(further.trace.isEmpty)
        #expect(topic.replay(after: 7).events.map(\.id) == [8])
    }

    @Test func restartTellsEverySubscriberTheNumberingStartsOverInANewEpoch() throws {
        let topic = topic(history: 10, published: 5)
        let old = topic.epoch
        let current = FakeSink(), ahead = FakeSink()
        let subscriptions = [subscribe(topic, current, at: 5), subscribe(topic, ahead, at: 9)]
        topic.restart(after: 0, epoch: "e2")
        topic.mirror(seq: 1, publishedAt: 4, data: Array("{\"k\":1}".utf8))
        #expect(topic.seq == 1 && topic.epoch == "e2" && old != "e2")
        // Never moved back silently: a reset first, then the new numbering.
        #expect(current.trace == ["reset t", "message t 1"] && ahead.trace == ["reset t", "message t 1"])
        #expect(try current.json(0) == ["type": "reset", "topic": "t", "seq": 0, "epoch": "e2"])
        #expect(try current.json(1) == ["type": "message", "topic": "t", "seq": 1, "publishedAt": 4, "data": ["k": 1]])
        #expect(subscriptions.map(\.position) == [1, 1])
        let (gap, events) = topic.replay(after: 0)
        #expect(gap == nil && events.map(\.id) == [1], "the old numbering's messages are gone")
        #expect(topic.publish(json(2), publishedAt: 5) == 2)
        #expect(current.trace == ["reset t", "message t 1", "message t 2"])
    }
}
