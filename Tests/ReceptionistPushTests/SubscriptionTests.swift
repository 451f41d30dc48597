@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

@Suite struct SubscriptionTests {
    private func changes(_ version: UInt64, _ changes: [ModelChange]) -> PushEvent {
        PushEvent.changes(ChangeSet(store: "s", version: version, committedAtMicroseconds: 0, changes: changes))
    }

    private func changes(_ version: UInt64) -> PushEvent {
        changes(version, [ModelChange(model: "m", keyPath: "n", oldValue: nil, newValue: .number(JSONNumber(Double(version))))])
    }

    private func message(_ seq: UInt64) -> PushEvent {
        PushEvent(name: "message", id: seq, json: PushEncoder.message(topic: "t", seq: seq, publishedAt: 0, data: json(.number(JSONNumber(Double(seq))))))
    }

    // MARK: Position (invariant 18)

    @Test func anEventAtOrBelowThePositionIsSkipped() {
        let sink = FakeSink()
        let subscription = Subscription(target: .store("s"), sink: sink, position: 5)
        #expect(!subscription.deliver(changes(4)))
        #expect(!subscription.deliver(changes(5)))
        #expect(subscription.deliver(changes(6)))
        #expect(!subscription.deliver(changes(6)))
        #expect(subscription.deliver(changes(8)))
        #expect(!subscription.deliver(changes(7)))
        let subscribed = PushEvent(name: "subscribed", id: nil, json: PushEncoder.subscribedStore("s", version: 9, epoch: "e"))
        #expect(!subscription.deliver(subscribed), "an event without a position is never a live event")
        #expect(sink.trace == ["changes s 6", "changes s 8"])
        #expect(sink.sent == sink.trace)
        #expect(subscription.position == 8)
    }

    @Test func advanceOnlyMovesForwardAndResetMovesAnywhere() {
        let sink = FakeSink()
        let subscription = Subscription(target: .topic("t"), sink: sink)
        #expect(subscription.position == 0)
        subscription.advance(to: 6)
        subscription.advance(to: 3)
        #expect(subscription.position == 6)
        subscription.reset(to: 2)
        #expect(subscription.position == 2)
        #expect(subscription.deliver(message(3)))
        #expect(sink.trace == ["message t 3"])
    }

    // MARK: A slow store subscriber conflates (invariant 20)

    /// A slow subscriber with `paths` gets its catch-up projected as a `maxRate` frame is: a model
    /// made and then cut back within it holds only the listed paths. (It got `{"style":{}}`,
    /// which applied to its copy differs from the projected store's `{}`.)
    @Test func aSlowSubscribersCatchUpIsProjectedOntoItsPaths() throws {
        let sink = FakeSink()
        let subscription = Subscription(
            target: .store("s"), sink: sink, position: 1, options: SubscriptionOptions(paths: [["style", "border"]]))
        sink.limitReached = true
        #expect(subscription.deliver(changes(2, [ModelChange(model: "m", keyPath: .whole, oldValue: nil, newValue: ["style": ["border": 1]])])))
        #expect(subscription.deliver(changes(3, [ModelChange(model: "m", keyPath: "style.border", oldValue: 1, newValue: nil)])))
        sink.limitReached = false
        #expect(subscription.flushConflated() == 2)
        #expect(try sink.json(0)["changes"] == [["model": "m", "path": "", "kind": "created", "value": [:]]])
    }

    @Test func aSlowStoreSubscriberConflatesThenCatchesUpWithOneMessage() throws {
        let sink = FakeSink()
        let subscription = Subscription(target: .store("s"), sink: sink, position: 2)
        #expect(subscription.deliver(changes(3, [ModelChange(model: "a", keyPath: "color", oldValue: "black", newValue: "red")])))
        #expect(sink.trace == ["changes s 3"] && !subscription.isConflating)

        sink.limitReached = true
        #expect(subscription.deliver(changes(4, [ModelChange(model: "a", keyPath: "color", oldValue: "red", newValue: "green")])))
        #expect(subscription.isConflating && subscription.position == 4)
        #expect(subscription.deliver(changes(5, [
            ModelChange(model: "a", keyPath: "color", oldValue: "green", newValue: "blue"),
            ModelChange(model: "b", keyPath: .whole, oldValue: nil, newValue: ["n": 1]),
        ])))
        #expect(subscription.deliver(changes(6, [ModelChange(model: "a", keyPath: "size", oldValue: nil, newValue: 2)])))
        // The socket drained, but nothing jumps the catch-up: later change sets join it.
        sink.limitReached = false
        #expect(subscription.deliver(changes(7, [ModelChange(model: "b", keyPath: "n", oldValue: 1, newValue: 2)])))
        #expect(!subscription.deliver(changes(7)), "still skipped by position while conflating")
        #expect(sink.trace == ["changes s 3"], "nothing queued while behind")
        #expect(subscription.position == 7)

        #expect(subscription.flushConflated() == 4)
        #expect(!subscription.isConflating)
        #expect(sink.trace == ["changes s 3", "changes s 7 conflated from 3"])
        #expect(sink.owed == ["changes s 7 conflated from 3"])
        #expect(try sink.json(1) == [
            "type": "changes", "store": "s", "version": 7, "from": 3, "conflated": true,
            "changes": [
                ["model": "a", "path": "color", "kind": "updated", "value": "blue"],
                ["model": "a", "path": "size", "kind": "created", "value": 2],
                ["model": "b", "path": "", "kind": "created", "value": ["n": 2]],
            ],
        ])
        #expect(sink.events[1].id == 7)

        #expect(subscription.flushConflated() == 0)
        #expect(subscription.deliver(changes(8)))
        #expect(sink.trace == ["changes s 3", "changes s 7 conflated from 3", "changes s 8"])
        #expect(sink.slowConsumerEnds.isEmpty)
    }

    @Test func resetDropsWhatWasConflated() {
        let sink = FakeSink()
        let subscription = Subscription(target: .store("s"), sink: sink, position: 1)
        sink.limitReached = true
        #expect(subscription.deliver(changes(2)) && subscription.deliver(changes(3)))
        #expect(subscription.isConflating)
        subscription.reset(to: 10)
        #expect(!subscription.isConflating && subscription.position == 10)
        sink.limitReached = false
        #expect(subscription.flushConflated() == 0)
        #expect(!subscription.deliver(changes(10)))
        #expect(subscription.deliver(changes(11)))
        #expect(sink.trace == ["changes s 11"])
    }

    // MARK: A slow topic subscriber is ended (invariant 20)

    @Test func aSlowTopicSubscriberIsEndedWithoutMovingItsPosition() {
        let sink = FakeSink()
        let subscription = Subscription(target: .topic("t"), sink: sink, position: 3)
        #expect(subscription.deliver(message(4)))
        sink.limitReached = true
        #expect(!subscription.deliver(message(5)))
        #expect(sink.slowConsumerEnds.count == 1 && sink.slowConsumerEnds.first === subscription)
        #expect(subscription.position == 4, "the client resumes from 4 and gets 5 from the history")
        #expect(!subscription.isConflating)
        #expect(subscription.flushConflated() == 0)
        #expect(sink.trace == ["message t 4"])
    }

    @Test func aClosingSinkIsNotDeliveredTo() {
        let sink = FakeSink()
        sink.closed = true
        let store = Subscription(target: .store("s"), sink: sink, position: 2)
        let topic = Subscription(target: .topic("t"), sink: sink, position: 2)
        #expect(!store.deliver(changes(3)))
        #expect(!topic.deliver(message(3)))
        #expect(store.position == 2 && topic.position == 2)
        #expect(!store.isConflating && store.flushConflated() == 0)
        #expect(sink.trace.isEmpty && sink.slowConsumerEnds.isEmpty)
    }

    // MARK: Gaps

    @Test func aGapIsReportedOnlyForWhatTheSubscriberHasNotHad() throws {
        let sink = FakeSink()
        let subscription = Subscription(target: .topic("t"), sink: sink, position: 5)
        subscription.gap(from: 2, to: 4, epoch: "e")
        subscription.gap(from: 3, to: 5, epoch: "e")
        #expect(sink.trace.isEmpty && subscription.position == 5)
        subscription.gap(from: 3, to: 8, epoch: "e")
        #expect(sink.owed == ["gap t 6...8"])
        #expect(try sink.json(0) == ["type": "gap", "topic": "t", "from": 6, "to": 8])
        // Numbered by its last lost message: an SSE reconnection resumes after the gap.
        #expect(sink.entries[0].event.id == 8 && sink.entries[0].event.epoch == "e")
        #expect(subscription.position == 8)
        subscription.gap(from: 9, to: 9, epoch: "e")
        #expect(!subscription.deliver(message(9)))
        #expect(subscription.deliver(message(10)))
        #expect(sink.trace == ["gap t 6...8", "gap t 9...9", "message t 10"])
    }
}
