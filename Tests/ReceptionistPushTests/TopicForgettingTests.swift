@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistTestSupport
import Testing

/// `--topic-ttl` and `--max-topics`: the topics a gateway keeps are bounded, and a topic it
/// forgot comes back in a new epoch, so an old number never means a new message.
@Suite struct TopicForgettingTests {
    private let second: UInt64 = 1_000_000

    @Test func onlyTopicsQuietForTheIdleTimeAndHeldByNothingAreForgotten() throws {
        let push = PushFixture()
        let hub = push.hub
        for name in ["old", "followed", "storing"] { _ = hub.publish(topic: name, data: json(1), publishedAt: 1 * second) }
        _ = hub.publish(topic: "recent", data: json(1), publishedAt: 9 * second)
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .topic("followed"))
        hub.topic("storing").publishesInFlight = 1

        #expect(hub.forgetIdleTopics(now: 10 * second, idle: 5 * second, release: { _ in true }) == 1)
        #expect(hub.topics["old"] == nil)
        #expect(Set(hub.topics.keys) == ["followed", "storing", "recent"])
        #expect(push.counters.topicsForgotten == 1)

        // An engine that cannot let go now keeps the topic until the next sweep.
        #expect(hub.forgetIdleTopics(now: 20 * second, idle: 5 * second, release: { $0.name != "recent" }) == 0)
        #expect(hub.topics["recent"] != nil)
        #expect(hub.forgetIdleTopics(now: 20 * second, idle: 5 * second, release: { _ in true }) == 1)
        #expect(Set(hub.topics.keys) == ["followed", "storing"])
        withExtendedLifetime(subscription) {}
    }

    @Test func aSubscriberLeavingKeepsTheTopicForTheIdleTimeFromThen() throws {
        let push = PushFixture()
        _ = push.hub.publish(topic: "left", data: json(1), publishedAt: 0)
        let sink = FakeSink()
        push.hub.unsubscribe(try push.subscribe(sink, .topic("left")))
        let now = Clock.microsecondsSinceEpoch()
        #expect(push.hub.forgetIdleTopics(now: now, idle: 60 * second, release: { _ in true }) == 0)
        #expect(push.hub.forgetIdleTopics(now: now + 61 * second, idle: 60 * second, release: { _ in true }) == 1)
    }

    @Test func aSubscriberComingBackToAForgottenTopicIsToldItsNumberMeansNothingNow() throws {
        let push = PushFixture()
        for n in 1...3 { _ = push.hub.publish(topic: "t", data: json(.number(JSONNumber(n))), publishedAt: 0) }
        let old = push.hub.topic("t").epoch
        push.hub.forgetIdleTopics(now: 10 * second, idle: second, release: { _ in true })
        _ = push.hub.publish(topic: "t", data: json("new"), publishedAt: 11 * second)

        for epoch in [old, nil] {
            let sink = FakeSink()
            let subscription = try push.subscribe(sink, .topic("t"), since: 3, epoch: epoch)
            let answer = try sink.json(0)
            #expect(answer["type"] == "subscribed" && answer["reset"] == true && answer["seq"] == 1)
            #expect(answer["epoch"]?.stringValue != old)
            #expect(sink.trace == ["subscribed t 1"], "no message of the new life is taken for one after 3")
            push.hub.unsubscribe(subscription)
        }
    }

    @Test func aPublishMayNotMakeATopicPastTheLimitUntilOneIsForgotten() {
        let push = PushFixture()
        push.hub.maxTopics = 2
        _ = push.hub.publish(topic: "a", data: json(1), publishedAt: 0)
        _ = push.hub.publish(topic: "b", data: json(1), publishedAt: 5 * second)
        #expect(push.hub.capacityRefusal(forTopic: "c") != nil)
        #expect(push.hub.capacityRefusal(forTopic: "a") == nil, "a topic kept takes messages")
        push.hub.forgetIdleTopics(now: 4 * second, idle: 2 * second, release: { _ in true })
        #expect(push.hub.capacityRefusal(forTopic: "c") == nil)
    }
}
