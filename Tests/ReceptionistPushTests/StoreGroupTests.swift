@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

/// Subscriptions with options, through the hub: each distinct set of options is a group of the
/// store's feed, with a receptionist of its own that filters (and, with `maxRate`, coalesces).
@Suite struct StoreGroupTests {
    typealias Options = SubscriptionOptions

    /// Where an array's bytes live: equal for two copies of one encoded buffer, not for two encodings.
    func storage(_ bytes: [UInt8]) -> UnsafePointer<UInt8>? {
        bytes.withUnsafeBufferPointer { $0.baseAddress }
    }

    @discardableResult
    func subscribe(
        _ push: PushFixture, _ sink: FakeSink, _ options: Options, since: UInt64? = nil, epoch: String? = nil
    ) throws -> Subscription {
        try push.hub.subscribe(sink, to: .store("s"), since: since, epoch: epoch, options: options).get()
    }

    func feed(_ push: PushFixture) throws -> StoreFeed {
        try #require(push.hub.feeds["s"])
    }

    /// The items of a JSON array; none for anything else.
    static func items(_ value: JSONValue) -> [JSONValue] {
        if case .array(let items) = value { return items }
        return []
    }

    /// The `changes` member of the event at `index`.
    func changes(_ sink: FakeSink, _ index: Int) throws -> JSONValue? {
        try sink.json(index)["changes"]
    }

    /// The `changes` of the event at `index`, as a set: for changes at different paths, whose
    /// order in a frame does not matter.
    func unorderedChanges(_ sink: FakeSink, _ index: Int) throws -> Set<JSONValue> {
        let list = try changes(sink, index).map(Self.items) ?? []
        #expect(Set(list).count == list.count, "no change twice")
        return Set(list)
    }

    // MARK: Groups

    @Test func subscriptionsWithEqualOptionsShareOneGroupAndItsEvents() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "m0", value: ["color": "red", "size": 1]), .put(model: "x", value: ["color": "red"])])
        let first = FakeSink(), second = FakeSink(), sizes = FakeSink(), everything = FakeSink()
        try subscribe(push, first, Options(models: ["m*"], paths: [["color"]]))
        // The same request written otherwise: another order, a repetition.
        try subscribe(push, second, Options(models: ["m*", "m*"], paths: [["color"], ["color"]]))
        try subscribe(push, sizes, Options(paths: [["size"]]))
        try subscribe(push, everything, .none)
        #expect(try feed(push).groupCount == 3, "no options, models m* with color, size")
        #expect(try feed(push).subscriberCount == 4)
        #expect(store.observerCount == 3, "one receptionist per group")

        #expect(first.trace == ["snapshot s 1"] && second.trace == ["snapshot s 1"])
        #expect(first.events[0] === second.events[0], "one snapshot for the group")
        #expect(try first.json(0)["models"] == ["m0": ["color": "red"]])

        try store.commit([.set(model: "m0", keyPath: "color", value: "blue")])
        try store.commit([.set(model: "x", keyPath: "color", value: "blue")])
        #expect(push.context.wakeups == 2, "one wake-up per group with something for it")
        push.drain()
        #expect(first.trace == ["snapshot s 1", "changes s 2"])
        #expect(first.events[1] === second.events[1], "the very same event for both members")
        #expect(storage(first.events[1].json) == storage(second.events[1].json), "encoded once")
        #expect(first.events[1].webSocketFrame === second.events[1].webSocketFrame)
        #expect(try changes(first, 1) == [["model": "m0", "path": "color", "kind": "updated", "value": "blue"]])
        #expect(sizes.trace == ["snapshot s 1"], "nothing it follows changed")
        #expect(everything.trace == ["snapshot s 1", "changes s 2", "changes s 3"])
        #expect(everything.events[1] !== first.events[1], "another group, another event")
    }

    @Test func aGroupGoesWithItsLastMemberAndTheGroupWithoutOptionsStays() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let options = Options(models: ["a"], maxRate: 10)
        let first = FakeSink(), second = FakeSink(), plain = FakeSink()
        let subscriptions = [try subscribe(push, first, options), try subscribe(push, second, options)]
        let plainSubscription = try subscribe(push, plain, .none)
        #expect(try feed(push).groupCount == 2 && store.observerCount == 2)

        push.hub.unsubscribe(subscriptions[0])
        #expect(try feed(push).groupCount == 2, "one member is left")
        push.hub.unsubscribe(subscriptions[1])
        #expect(try feed(push).groupCount == 1 && store.observerCount == 1, "its receptionist stopped observing")
        try store.put("a", 1)
        #expect(push.context.wakeups == 1, "only the group without options is woken")

        push.hub.unsubscribe(plainSubscription)
        #expect(try feed(push).groupCount == 1 && store.observerCount == 1, "the group without options stays")
        #expect(try feed(push).subscriberCount == 0)
        push.drain()
        #expect(first.trace == ["snapshot s 0"] && second.trace == ["snapshot s 0"])

        // The same options again: a group of their own, from the store's version now.
        let again = FakeSink()
        try subscribe(push, again, options)
        #expect(try feed(push).groupCount == 2)
        try store.put("a", 2)
        push.drain()
        #expect(again.trace == ["snapshot s 1", "changes s 2 conflated from 1"])
    }

    /// A model created within a frame absorbs the changes after it; one that removes a listed
    /// path must not leave the objects that led to it, which the projection does not have.
    @Test func aModelCreatedWithinAFrameIsSentAsItsProjection() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let sink = FakeSink()
        try subscribe(push, sink, Options(paths: [["style", "border"]], maxRate: 1))
        try store.commit([.put(model: "a", value: ["x": 1])])  // the first change after a quiet spell goes at once
        push.drain()
        #expect(sink.trace.count == 2)
        try store.commit([.put(model: "m", value: ["style": ["border": 1], "label": "L"])])
        try store.commit([.set(model: "m", keyPath: "style.border", value: nil)])
        push.drain()
        #expect(sink.trace.count == 2, "the next frame waits for its time")
        push.context.advance(by: 1)
        push.drain()
        #expect(sink.trace.count == 3)
        #expect(try changes(sink, 2) == [["model": "m", "path": "", "kind": "created", "value": [:]]])
    }

    @Test func aStoreServesAtMostMaxGroupsDistinctSetsOfOptions() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let sinks = (0..<StoreFeed.maxGroups).map { _ in FakeSink() }
        // The group without options is the first; every other sink asks for models of its own.
        try subscribe(push, sinks[0], .none)
        for index in 1..<StoreFeed.maxGroups {
            try subscribe(push, sinks[index], Options(models: ["m\(index)"]))
        }
        #expect(try feed(push).groupCount == StoreFeed.maxGroups)
        #expect(store.observerCount == StoreFeed.maxGroups)
        let refused = FakeSink()
        let answer = push.hub.subscribe(refused, to: .store("s"), since: nil, options: Options(models: ["another"]))
        guard case .failure(let problem) = answer else {
            Issue.record("a set of options past the cap was accepted")
            return
        }
        #expect(problem.code == .tooManySubscriptions)
        #expect(refused.trace.isEmpty)
        // Options a group already serves still join it.
        let joining = FakeSink()
        try subscribe(push, joining, Options(models: ["m1"]))
        #expect(try feed(push).groupCount == StoreFeed.maxGroups)
        withExtendedLifetime(sinks) {}
    }

    // MARK: Snapshots

    @Test func theSnapshotIsProjected() throws {
        let push = PushFixture(storeHistory: 2)
        let store = try push.createStore("s")
        try store.commit([
            .put(model: "tile-1", value: ["color": "a", "size": 1, "style": ["border": ["width": 2, "dash": true], "fill": 3]]),
            .put(model: "tile-12", value: ["size": 2]),
            .put(model: "tile-2", value: ["color": "c"]),
            .put(model: "other", value: ["color": "d"]),
        ])
        let options = Options(models: ["tile-1*", "other"], paths: [["color"], ["style", "border", "width"]])
        let sink = FakeSink()
        let subscription = try subscribe(push, sink, options)
        #expect(sink.owed == ["snapshot s 1"])
        #expect(try sink.json(0) == [
            "type": "snapshot", "store": "s", "version": 1, "epoch": .string(store.epoch), "reset": false,
            "filter": ["models": ["other", "tile-1*"], "paths": ["color", "style.border.width"]],
            "models": [
                "other": ["color": "d"], "tile-1": ["color": "a", "style": ["border": ["width": 2]]], "tile-12": [:],
            ],
        ])
        #expect(subscription.position == 1)

        // A reset snapshot (a version too old to resume) is projected the same way.
        for n in 1...3 { try store.put("tile-2", n) }
        let tooOld = FakeSink()
        try subscribe(push, tooOld, options, since: 1)
        #expect(tooOld.trace == ["snapshot s 4 reset"])
        #expect(try tooOld.json(0)["models"] == sink.json(0)["models"])
        let future = FakeSink()
        try subscribe(push, future, options, since: 99)
        #expect(future.trace == ["snapshot s 4 reset"])
        #expect(future.events[0] === tooOld.events[0], "one reset snapshot per version")
        #expect(push.counters.resets == 2)
    }

    // MARK: Filtering, live and resumed

    @Test func aChangeSetTheFilterLeavesEmptySendsNothingAndResumeIsExact() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let options = Options(models: ["a"], paths: [["color"]])
        let live = FakeSink()
        let subscription = try subscribe(push, live, options)
        try store.commit([.put(model: "a", value: ["color": "red", "size": 1])])  // 1
        try store.commit([.put(model: "b", value: ["color": "red"])])  // 2: another model
        try store.commit([.set(model: "a", keyPath: "size", value: 2)])  // 3: another path
        try store.commit([.set(model: "a", keyPath: "color", value: "blue"), .set(model: "b", keyPath: "color", value: "blue")])  // 4
        push.drain()
        #expect(live.trace == ["snapshot s 0", "changes s 1", "changes s 4"])
        #expect(try changes(live, 1) == [["model": "a", "path": "", "kind": "created", "value": ["color": "red"]]])
        #expect(try changes(live, 2) == [["model": "a", "path": "color", "kind": "updated", "value": "blue"]])
        #expect(subscription.position == 4)

        // Resuming from any version the client may hold replays exactly what passes after it.
        var resumedSinks: [FakeSink] = []  // a subscription holds its sink unowned: keep them alive
        for since: UInt64 in 1...3 {
            let resumed = FakeSink()
            resumedSinks.append(resumed)
            let resumedSubscription = try subscribe(push, resumed, options, since: since, epoch: store.epoch)
            #expect(resumed.trace == ["subscribed s \(since) resumed", "changes s 4"], "since \(since)")
            #expect(resumed.events[1] === live.events[2], "the event fanned out live, not another encoding")
            #expect(resumedSubscription.position == 4)
        }
        let current = FakeSink()
        try subscribe(push, current, options, since: 4)
        #expect(current.trace == ["subscribed s 4 resumed"])

        // After a filtered-out change set, a resume from it replays nothing and misses nothing.
        try store.commit([.set(model: "b", keyPath: "color", value: "green")])  // 5
        push.drain()
        let afterFiltered = FakeSink()
        let afterSubscription = try subscribe(push, afterFiltered, options, since: 5)
        #expect(afterFiltered.trace == ["subscribed s 5 resumed"])
        let atFour = FakeSink()
        let atFourSubscription = try subscribe(push, atFour, options, since: 4)
        #expect(atFour.trace == ["subscribed s 4 resumed"])
        #expect(afterSubscription.position == 5 && atFourSubscription.position == 5, "past what was filtered out")
        try store.commit([.set(model: "a", keyPath: "color", value: "black")])  // 6
        push.drain()
        for sink in [live, current, afterFiltered, atFour] + resumedSinks { #expect(sink.trace.last == "changes s 6") }
        #expect(afterFiltered.trace.count == 2 && atFour.trace.count == 2 && live.trace.count == 4)
    }

    @Test func aResumeThroughAFilterWithMaxRateIsOneCoalescedFrame() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let options = Options(models: ["a"], paths: [["color"]], maxRate: 4)
        try store.commit([.put(model: "a", value: ["color": "red", "size": 1])])  // 1
        try store.commit([.put(model: "b", value: ["color": "red"])])  // 2
        let three = try store.commit([.set(model: "a", keyPath: "color", value: "blue")])  // 3
        try store.commit([.set(model: "a", keyPath: "size", value: 2)])  // 4
        let five = try store.commit([.set(model: "a", keyPath: "color", value: "green")])  // 5
        try store.commit([.set(model: "b", keyPath: "color", value: "blue")])  // 6

        let sink = FakeSink()
        let subscription = try subscribe(push, sink, options, since: 1, epoch: store.epoch)
        #expect(sink.trace == ["subscribed s 1 resumed", "changes s 6 conflated from 1"])
        #expect(try sink.json(1) == [
            "type": "changes", "store": "s", "version": 6, "from": 1, "conflated": true,
            "committedAt": .number(JSONNumber(five.committedAtMicroseconds)),
            "firstCommittedAt": .number(JSONNumber(three.committedAtMicroseconds)),
            "changes": [["model": "a", "path": "color", "kind": "updated", "value": "green"]],
        ])
        #expect(subscription.position == 6)
        #expect(push.counters.storeResumes == 1)

        // Nothing after `since` passes: no frame, and the position is past it all.
        let quiet = FakeSink()
        let quietSubscription = try subscribe(push, quiet, options, since: 5)
        #expect(quiet.trace == ["subscribed s 5 resumed"])
        #expect(quietSubscription.position == 6)

        // Live, the group's frames go on from the version the group started at.
        try store.commit([.set(model: "a", keyPath: "color", value: "white")])  // 7
        push.drain()
        #expect(sink.trace.last == "changes s 7 conflated from 6" && quiet.trace.last == "changes s 7 conflated from 6")
        #expect(sink.events.last === quiet.events.last)
    }

    // MARK: maxRate

    @Test func maxRateFramesChainAndCoalesceAtTheRate() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "a", value: ["color": 0, "size": 0]), .put(model: "b", value: ["color": 0])])
        try store.commit([.set(model: "a", keyPath: "size", value: 1)])
        let options = Options(paths: [["color"]], maxRate: 4)  // a frame every 0.25 s at most
        let first = FakeSink(), second = FakeSink(), plain = FakeSink()
        try subscribe(push, first, options)
        try subscribe(push, second, options)
        try subscribe(push, plain, .none)

        let three = try store.commit([.set(model: "a", keyPath: "color", value: 1)])
        push.drain()
        #expect(first.trace == ["snapshot s 2", "changes s 3 conflated from 2"], "the first change after a quiet spell goes at once")
        #expect(try first.json(1) == [
            "type": "changes", "store": "s", "version": 3, "from": 2, "conflated": true,
            "committedAt": .number(JSONNumber(three.committedAtMicroseconds)),
            "firstCommittedAt": .number(JSONNumber(three.committedAtMicroseconds)),
            "changes": [["model": "a", "path": "color", "kind": "updated", "value": 1]],
        ])

        let four = try store.commit([.set(model: "a", keyPath: "color", value: 2)])
        try store.commit([.set(model: "a", keyPath: "size", value: 5)])  // filtered out
        try store.commit([.set(model: "b", keyPath: "color", value: 1)])
        let seven = try store.commit([.set(model: "a", keyPath: "color", value: 3)])
        push.drain()
        #expect(first.trace.count == 2, "within the interval: held")
        #expect(plain.trace == ["snapshot s 2", "changes s 3", "changes s 4", "changes s 5", "changes s 6", "changes s 7"])
        push.context.advance(by: 0.125)
        push.drain()
        #expect(first.trace.count == 2)
        push.context.advance(by: 0.125)
        push.drain()
        #expect(first.trace == ["snapshot s 2", "changes s 3 conflated from 2", "changes s 7 conflated from 3"])
        #expect(try first.json(2) == [
            "type": "changes", "store": "s", "version": 7, "from": 3, "conflated": true,
            "committedAt": .number(JSONNumber(seven.committedAtMicroseconds)),
            "firstCommittedAt": .number(JSONNumber(four.committedAtMicroseconds)),
            "changes": [
                ["model": "a", "path": "color", "kind": "updated", "value": 3],
                ["model": "b", "path": "color", "kind": "updated", "value": 1],
            ],
        ])
        #expect(first.events[2] === second.events[2], "one frame for every member")
        #expect(second.trace == first.trace)

        // Filtered out: no frame, no timer. Then after a quiet spell, at once again.
        try store.commit([.set(model: "a", keyPath: "size", value: 6)])  // 8
        #expect(push.context.waiting == 0)
        push.context.advance(by: 1)
        try store.commit([.set(model: "b", keyPath: "color", value: 2)])  // 9
        push.drain()
        #expect(first.trace.last == "changes s 9 conflated from 7")
        // Change sets fanned out: 1 + 3 + 1 in frames of the group, 3...9 one by one without options.
        #expect(push.counters.changeSetsFannedOut == 5 + 7)
        #expect(second.trace == first.trace && plain.trace.last == "changes s 9")
    }

    @Test func aMemberJoiningBetweenFramesGetsOnlyWhatItsSnapshotLacks() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let options = Options(models: ["a"], maxRate: 4)
        let early = FakeSink(), late = FakeSink()
        try subscribe(push, early, options)
        try store.put("a", 1)
        push.drain()  // a frame at once, at 1000
        try store.put("a", 2)  // held for the next frame
        let lateSubscription = try subscribe(push, late, options)
        #expect(late.trace == ["snapshot s 2"])
        push.context.advance(by: 0.25)
        push.drain()
        #expect(early.trace == ["snapshot s 0", "changes s 1 conflated from 0", "changes s 2 conflated from 1"])
        #expect(late.trace == ["snapshot s 2"], "its snapshot covered that frame")
        #expect(lateSubscription.position == 2)
        push.context.advance(by: 0.25)
        try store.put("a", 3)
        push.drain()
        #expect(late.trace == ["snapshot s 2", "changes s 3 conflated from 2"])
        #expect(early.events.last === late.events.last)
    }
}
