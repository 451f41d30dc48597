@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

/// Invariant 19: a broadcast is encoded once.
@Suite struct PushEventTests {
    /// The frames are laid straight into their shared buffer; they must be byte for byte what the
    /// encoders write, at every length form of the WebSocket header.
    @Test(arguments: [0, 1, 125, 126, 65_535, 65_536, 70_000])
    func framesAreWhatTheEncodersWrite(length: Int) {
        let json = (0..<length).map { UInt8(truncatingIfNeeded: 0x20 + $0 % 90) }
        let event = PushEvent(name: "message", id: 42, json: json)
        #expect(event.webSocketFrame.array == WebSocketEncoder.frame(.text, payload: json))
        #expect(event.sseEvent.array == SSEEncoder.event("message", id: 42, data: json))
        let unnumbered = PushEvent(name: "gap", id: nil, json: json)
        #expect(unnumbered.sseEvent.array == SSEEncoder.event("gap", id: nil, data: json))
    }

    /// A run's frame is written in one pass: its messages' frames one after another, whether a
    /// message's own frame was made before (copied) or not (written in place), at every length
    /// form of the header.
    @Test func aRunsFrameIsItsMessagesFramesInOrder() {
        let messages = [0, 126, 1, 65_536, 125].enumerated().map { index, length in
            PushEvent(name: "message", id: UInt64(index + 1), json: (0..<length).map { UInt8(truncatingIfNeeded: 0x30 + $0 % 40) })
        }
        let madeBefore = messages[1].webSocketFrame
        let run = PushEvent(run: messages)
        let expected = messages.flatMap { WebSocketEncoder.frame(.text, payload: $0.json) }
        #expect(run.webSocketFrame.array == expected)
        #expect(run.webSocketFrame.count == expected.count)
        #expect(messages[1].webSocketFrame === madeBefore)
        #expect(PushEvent(run: [run, messages[0]]).webSocketFrame.array == expected + WebSocketEncoder.frame(.text, payload: messages[0].json))
    }

    @Test func oneChangeSetReachesEverySinkAsOneEvent() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let sinks = (0..<5).map { _ in FakeSink() }
        for sink in sinks { try push.subscribe(sink, .store("s")) }
        try store.put("m", 1)
        try store.put("m", 2)
        push.drain()

        for sink in sinks { #expect(sink.trace == ["snapshot s 0", "changes s 1", "changes s 2"]) }
        for index in 1...2 {
            let first = sinks[0].events[index]
            #expect(sinks.allSatisfy { $0.events[index] === first }, "change set \(index) is one PushEvent for all")
            #expect(first.changeSet?.version == UInt64(index))
        }
        #expect(sinks[0].events[1] !== sinks[0].events[2])
    }

    @Test func oneTopicMessageIsOneEventForEverySinkAndTheHistory() throws {
        let push = PushFixture()
        let sinks = (0..<3).map { _ in FakeSink() }
        for sink in sinks { try push.subscribe(sink, .topic("t")) }
        _ = push.hub.publish(topic: "t", data: json("hello"), publishedAt: 7)
        let first = sinks[0].events[1]
        #expect(sinks.allSatisfy { $0.events[1] === first })
        let replayed = push.hub.topic("t").replay(after: 0).events
        #expect(replayed.count == 1 && replayed[0] === first, "a replay hands out the same event again")
    }

    @Test func eachTransportsBytesAreBuiltOnceOnFirstUse() throws {
        let changeSet = ChangeSet(store: "s", version: 3, committedAtMicroseconds: 5, changes: [
            ModelChange(model: "m", keyPath: "n", oldValue: 1, newValue: 2),
        ])
        let event = PushEvent.changes(changeSet)
        #expect(event.name == "changes" && event.id == 3 && event.changeSet == changeSet)
        #expect(event.json == PushEncoder.changes(changeSet))

        let frame = event.webSocketFrame
        #expect(event.webSocketFrame === frame)
        #expect(frame.array == WebSocketEncoder.frame(.text, payload: event.json))
        let sse = event.sseEvent
        #expect(event.sseEvent === sse)
        #expect(sse !== frame)
        #expect(sse.array == Array("event: changes\nid: 3\ndata: ".utf8) + event.json + Array("\n\n".utf8))
    }

    @Test func anEventWithoutAPositionHasNoSSEId() {
        let json = PushEncoder.gap(topic: "t", from: 1, to: 2)
        let event = PushEvent(name: "gap", id: nil, json: json)
        #expect(event.changeSet == nil)
        #expect(event.sseEvent.array == Array("event: gap\ndata: ".utf8) + json + Array("\n\n".utf8))
        #expect(event.sseEvent === event.sseEvent)
    }
}

/// Reconnect storms: resuming subscribers share the events (and bytes) of the live stream.
@Suite struct ReplayEncodingTests {
    @Test func resumingSubscribersReplayTheEventsFannedOutLive() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let live = FakeSink()
        try push.subscribe(live, .store("s"))
        for n in 1...3 { try store.put("m", n) }
        push.drain()
        let liveEvents = live.events.filter { $0.name == "changes" }
        #expect(liveEvents.map(\.id) == [1, 2, 3])
        let first = FakeSink(), second = FakeSink()
        try push.subscribe(first, .store("s"), since: 1, epoch: store.epoch)
        try push.subscribe(second, .store("s"), since: 1, epoch: store.epoch)
        let replayed = [first, second].map { $0.events.filter { $0.name == "changes" } }
        for events in replayed {
            #expect(events.map(\.id) == [2, 3])
            #expect(events[0] === liveEvents[1] && events[1] === liveEvents[2], "the live events, not new encodings")
            #expect(events[0].webSocketFrame === liveEvents[1].webSocketFrame)
        }
    }

    @Test func subscribersAtOneVersionShareOneSnapshotEvent() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.put("m", 1)
        let a = FakeSink(), b = FakeSink()
        try push.subscribe(a, .store("s"))
        try push.subscribe(b, .store("s"))
        let snapshots = [a, b].map { $0.events.first { $0.name == "snapshot" } }
        #expect(snapshots[0] != nil && snapshots[0] === snapshots[1])
        #expect(snapshots[0]?.webSocketFrame === snapshots[1]?.webSocketFrame)
    }
}
