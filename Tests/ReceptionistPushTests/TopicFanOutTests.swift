@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistSync
import Testing

/// A topic's fan-out deferred to the end of the loop's turn (invariant 47): each subscriber gets
/// the turn's messages together, in order, once; what it already has is not sent again; and a
/// gap or reset follows what was published before it.
@Suite struct TopicFanOutTests {
    /// A hub whose fan-out waits for `turn()`, as the gateway's waits for the end of the loop's turn.
    private final class Deferred {
        let push = PushFixture()
        private(set) var scheduled = 0

        init() {
            push.hub.deferTopicFanOut { [unowned self] in self.scheduled += 1 }
        }

        func publish(_ n: Int) {
            _ = push.hub.publish(topic: "t", data: json(.number(JSONNumber(Double(n)))), publishedAt: 0)
        }

        func turn() {
            push.hub.fanOutDeferredTopics()
        }

        /// A new subscriber of the topic, from its latest message on.
        func subscriber() throws -> FakeSink {
            let sink = FakeSink()
            try push.subscribe(sink, .topic("t"))
            return sink
        }
    }

    @Test func aTurnsMessagesReachEachSubscriberTogetherInOrder() throws {
        let deferred = Deferred()
        let (a, b) = (try deferred.subscriber(), try deferred.subscriber())
        for n in 1...3 { deferred.publish(n) }
        #expect(a.sent.isEmpty && b.sent.isEmpty, "nothing leaves before the end of the turn")
        #expect(deferred.scheduled == 1)
        deferred.turn()
        for sink in [a, b] {
            #expect(sink.entries.count == 2, "the `subscribed`, then one write of the run")
            #expect(sink.trace == ["subscribed t 0", "message t 1", "message t 2", "message t 3"])
        }
        #expect(deferred.push.counters.deliveries == 6 && deferred.push.counters.topicPublishes == 3)

        // The next turn schedules again; a turn with one message sends it alone.
        deferred.publish(4)
        #expect(deferred.scheduled == 2)
        deferred.turn()
        #expect(a.entries.count == 3 && a.events.last?.run.isEmpty == true)
        #expect(a.trace.last == "message t 4")
        deferred.turn()
        #expect(a.entries.count == 3, "an empty turn sends nothing")
    }

    @Test func aRunsBytesAreItsMessagesBytesInOrder() throws {
        let deferred = Deferred()
        let sink = try deferred.subscriber()
        for n in 1...3 { deferred.publish(n) }
        deferred.turn()
        let run = try #require(sink.events.last)
        #expect(run.run.count == 3 && run.messageCount == 3 && run.id == 3)
        #expect(run.webSocketFrame.array == run.run.flatMap(\.webSocketFrame.array))
        #expect(run.sseEvent.array == run.run.flatMap(\.sseEvent.array))
    }

    @Test func aSubscriberThatJoinedDuringTheTurnGetsOnlyWhatFollowsIt() throws {
        let deferred = Deferred()
        let early = try deferred.subscriber()
        deferred.publish(1)
        deferred.publish(2)
        // Joins at 2: its `subscribed` says so, and the turn's first two messages are not its own.
        let late = try deferred.subscriber()
        deferred.publish(3)
        // Resumes from 1 within the turn: 2 and 3 come in the replay, at once.
        let resumed = FakeSink()
        try deferred.push.subscribe(resumed, .topic("t"), since: 1)
        deferred.turn()
        #expect(early.trace == ["subscribed t 0", "message t 1", "message t 2", "message t 3"])
        #expect(late.trace == ["subscribed t 2", "message t 3"])
        #expect(resumed.trace == ["subscribed t 3 resumed", "message t 2", "message t 3"])
        #expect(deferred.push.counters.deliveries == 3 + 1)
    }

    @Test func aGapFollowsWhatWasPublishedBeforeIt() throws {
        let deferred = Deferred()
        let sink = try deferred.subscriber()
        deferred.publish(1)
        deferred.publish(2)
        deferred.push.hub.topic("t").skip(from: 3, to: 5)
        #expect(sink.trace == ["subscribed t 0", "message t 1", "message t 2", "gap t 3...5"])
        deferred.turn()
        #expect(sink.trace.count == 4, "the turn has nothing left to send")
    }

    @Test func aResetFollowsWhatWasPublishedBeforeIt() throws {
        let deferred = Deferred()
        let sink = try deferred.subscriber()
        deferred.publish(1)
        deferred.push.hub.topic("t").restart(after: 0, epoch: "again")
        deferred.push.hub.topic("t").mirror(seq: 1, publishedAt: 0, data: json(9))
        #expect(sink.trace.prefix(2) == ["subscribed t 0", "message t 1"])
        #expect(sink.events[2].name == "reset")
        deferred.turn()
        #expect(sink.trace.last == "message t 1")
        #expect(try JSONParser.parse(sink.events.last!.json)["data"] == 9)
    }

    @Test func aSlowSubscriberIsEndedOnceForTheWholeRun() throws {
        let deferred = Deferred()
        let (slow, fine) = (try deferred.subscriber(), try deferred.subscriber())
        slow.limitReached = true
        for n in 1...4 { deferred.publish(n) }
        deferred.turn()
        #expect(slow.slowConsumerEnds.count == 1 && slow.sent.isEmpty)
        #expect(fine.sent.count == 1 && fine.trace.count == 5)
        #expect(deferred.push.counters.deliveries == 4)
    }
}
