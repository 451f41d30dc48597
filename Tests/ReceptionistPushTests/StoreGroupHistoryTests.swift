@testable import ReceptionistPush
import ReceptionistModel
import ReceptionistWire
import Testing

/// A store group keeps the events it fanned out live (without `maxRate`) for the newest
/// `--history` change sets only (docs/DESIGN.md's queue table: "the oldest event leaves (a resume
/// then encodes again)"). A resume the store's own, longer history still covers gets, for the
/// versions the group still holds, the very events the live members got (`===`), and for the
/// older ones events of equal content encoded anew, once per resume.
///
/// The group's bound is the hub's history limit (`PushFixture`'s `topicHistory`, or the hub's
/// `historyOf` for the store's name), not the store's (`storeHistory`): the tests set the store's
/// history far above it, so the resume is a replay, never a reset.
@Suite struct StoreGroupHistoryTests {
    /// The group's bound.
    static let limit = 3
    /// Change sets committed and fanned out live: more than the group keeps.
    static let committed: UInt64 = 8
    /// The version the resumes start from: its successors are all in the store's history, the
    /// oldest of them no longer in the group's.
    static let since: UInt64 = 2

    /// Where an array's bytes live: equal for two copies of one encoded buffer, not for two encodings.
    private func storage(_ bytes: [UInt8]) -> UnsafePointer<UInt8>? {
        bytes.withUnsafeBufferPointer { $0.baseAddress }
    }

    /// The `changes` events a sink got, by version.
    private func changesByVersion(_ sink: FakeSink) -> [UInt64: PushEvent] {
        var byVersion: [UInt64: PushEvent] = [:]
        for event in sink.events where event.name == "changes" {
            if let id = event.id { byVersion[id] = event }
        }
        return byVersion
    }

    /// Checks a resumed member's replay against the live member's events: the same objects for
    /// the versions `kept` holds, equal content in a buffer of its own for the older ones.
    private func expectReplay(
        _ resumed: FakeSink, matches live: FakeSink, kept: ClosedRange<UInt64>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let replayed = changesByVersion(resumed), fannedOut = changesByVersion(live)
        #expect(replayed.keys.sorted() == Array((Self.since + 1)...Self.committed), sourceLocation: sourceLocation)
        for version in (Self.since + 1)...Self.committed {
            guard let event = replayed[version], let liveEvent = fannedOut[version] else {
                Issue.record("version \(version) missing", sourceLocation: sourceLocation)
                continue
            }
            #expect(event.json == liveEvent.json, "version \(version): the same content", sourceLocation: sourceLocation)
            if kept.contains(version) {
                #expect(event === liveEvent, "version \(version): still held, the live event", sourceLocation: sourceLocation)
            } else {
                #expect(event !== liveEvent, "version \(version): left the group, encoded again", sourceLocation: sourceLocation)
                #expect(storage(event.json) != storage(liveEvent.json), "version \(version): bytes of its own",
                        sourceLocation: sourceLocation)
            }
        }
    }

    /// Commits `committed` change sets, each fanned out to `live` as it is drained.
    private func commitLive(_ push: PushFixture, _ store: ModelStore) throws {
        for n in 1...Int(Self.committed) {
            try store.put("m", n)
            push.drain()
        }
    }

    @Test func theGroupWithoutOptionsKeepsTheNewestHistoryLimitEvents() throws {
        let push = PushFixture(storeHistory: 100, topicHistory: Self.limit)
        let store = try push.createStore("s")
        let live = FakeSink()
        try push.subscribe(live, .store("s"))
        try commitLive(push, store)
        #expect(live.trace == ["snapshot s 0"] + (1...Self.committed).map { "changes s \($0)" })
        #expect(try #require(push.hub.feeds["s"]).groupCount == 1, "one group: the events are its own")

        let kept = (Self.committed - UInt64(Self.limit) + 1)...Self.committed  // 6...8
        let first = FakeSink(), second = FakeSink()
        let firstSubscription = try push.subscribe(first, .store("s"), since: Self.since, epoch: store.epoch)
        let secondSubscription = try push.subscribe(second, .store("s"), since: Self.since, epoch: store.epoch)
        for resumed in [first, second] {
            #expect(resumed.trace == ["subscribed s \(Self.since) resumed"] + ((Self.since + 1)...Self.committed).map { "changes s \($0)" },
                    "a replay from the store's history, not a reset")
            expectReplay(resumed, matches: live, kept: kept)
        }
        #expect(firstSubscription.position == Self.committed && secondSubscription.position == Self.committed)

        // What the group no longer holds is encoded for each resume anew, not kept again.
        let firstReplay = changesByVersion(first), secondReplay = changesByVersion(second)
        for version in (Self.since + 1)..<kept.lowerBound {
            #expect(firstReplay[version] !== secondReplay[version], "version \(version): one encoding per resume")
        }
        for version in kept {
            #expect(firstReplay[version] === secondReplay[version], "version \(version): one encoding for all")
        }
        #expect(push.counters.resets == 0)
    }

    /// A group with options keeps the same number of events, and the per-name limit the gateway
    /// sets through `historyOf` (a namespace's `--history`) is the one that reaches it.
    @Test func aFilteredGroupKeepsTheNewestEventsOfItsStoresHistoryLimit() throws {
        let push = PushFixture(storeHistory: 100, topicHistory: 100)
        push.hub.historyOf = { name in name == "s" ? Self.limit : 100 }
        let store = try push.createStore("s")
        let options = SubscriptionOptions(models: ["m"])
        let live = FakeSink()
        let liveSubscription = try push.hub.subscribe(live, to: .store("s"), since: nil, epoch: nil, options: options).get()
        try commitLive(push, store)
        #expect(live.trace == ["snapshot s 0"] + (1...Self.committed).map { "changes s \($0)" })

        let resumed = FakeSink()
        let subscription = try push.hub.subscribe(resumed, to: .store("s"), since: Self.since, epoch: store.epoch, options: options).get()
        #expect(resumed.trace.first == "subscribed s \(Self.since) resumed")
        expectReplay(resumed, matches: live, kept: (Self.committed - UInt64(Self.limit) + 1)...Self.committed)
        #expect(subscription.position == Self.committed && liveSubscription.position == Self.committed)
    }
}
