@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

/// Subscriptions with options, through the hub: each distinct set of options is a group of the
/// store's feed, with a receptionist of its own that filters (and, with `maxRate`, coalesces).
@Suite struct StoreGroupTests {
    private typealias Options = SubscriptionOptions

    /// Where an array's bytes live: equal for two copies of one encoded buffer, not for two encodings.
    private func storage(_ bytes: [UInt8]) -> UnsafePointer<UInt8>? {
        bytes.withUnsafeBufferPointer { $0.baseAddress }
    }

    @discardableResult
    private func subscribe(
        _ push: PushFixture, _ sink: FakeSink, _ options: Options, since: UInt64? = nil, epoch: String? = nil
    ) throws -> Subscription {
        try push.hub.subscribe(sink, to: .store("s"), since: since, epoch: epoch, options: options).get()
    }

    private func feed(_ push: PushFixture) throws -> StoreFeed {
        try #require(push.hub.feeds["s"])
    }

    /// The `changes` member of the event at `index`.
    private func changes(_ sink: FakeSink, _ index: Int) throws -> JSONValue? {
        try sink.json(index)["changes"]
    }

    /// The `changes` of the event at `index`, as a set: for changes at different paths, whose
    /// order in a frame does not matter.
    private func unorderedChanges(_ sink: FakeSink, _ index: Int) throws -> Set<JSONValue> {
        let list = try changes(sink, index).map(items) ?? []
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

    @Test func aFrameConvergesToTheProjectedStore() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "m", value: ["color": "a", "style": ["border": 1, "fill": 2], "size": 1])])
        let options = Options(paths: [["color"], ["style", "border"]], maxRate: 4)
        let filter = ChangeFilter(models: nil, paths: [["color"], ["style", "border"]].map(ModelKeyPath.init))
        let sink = FakeSink()
        try subscribe(push, sink, options)
        var client = try ClientCopy(sink, paths: filter.paths)
        #expect(client.models == ["m": ["color": "a", "style": ["border": 1]]])

        // Rounds of changes, each folded into one frame.
        let rounds: [[StoreOperation]] = [
            [.set(model: "m", keyPath: "color", value: "b")],
            [.set(model: "m", keyPath: "style", value: ["fill": 3]), .set(model: "m", keyPath: "color", value: "c")],
            [.put(model: "m", value: ["color": "d", "style": ["border": ["width": 2]]])],
            [.set(model: "m", keyPath: "style.border.width", value: 3)],
            [.put(model: "n", value: ["color": "x", "size": 2])],
            [.patch(model: "n", patch: ["style": ["border": 7], "color": nil])],
            [.delete(model: "m")],
            [.set(model: "n", keyPath: "style.border", value: nil)],
        ]
        for (round, operations) in rounds.enumerated() {
            for operation in operations { try store.commit([operation]) }
            push.context.advance(by: 0.25)
            push.drain()
            try client.catchUp()
            #expect(client.version == store.version, "round \(round)")
            #expect(unordered(client.models) == unordered(filter.project(store.snapshot().models)), "round \(round)")
        }
        #expect(sink.trace.count == rounds.count + 1, "one frame per round")
    }

    /// A path (or a model) created and removed again within one frame leaves no value: it is sent
    /// as `deleted`, so a client applying the frame removes it and holds what the store holds.
    @Test func aPathCreatedAndRemovedWithinOneFrameIsNotSentAsCreated() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "m", value: ["color": "a"])])
        let options = Options(maxRate: 4)
        let sink = FakeSink()
        try subscribe(push, sink, options)
        var client = try ClientCopy(sink, paths: nil)
        try store.commit([.set(model: "m", keyPath: "color", value: "b")])
        push.drain()  // at once; the next changes share one frame
        try store.commit([.set(model: "m", keyPath: "size", value: 1)])
        try store.commit([.set(model: "m", keyPath: "size", value: nil)])
        try store.commit([.put(model: "n", value: ["color": "x"])])
        try store.commit([.delete(model: "n")])
        push.context.advance(by: 0.25)
        push.drain()
        try client.catchUp()
        #expect(sink.trace.last == "changes s 6 conflated from 2")
        let frame = try #require(try changes(sink, sink.entries.count - 1).map(items))
        #expect(!frame.contains { $0["kind"] == "created" && $0["value"] == .null }, "\(frame)")
        #expect(unordered(client.models) == unordered(store.snapshot().models))
    }

    // MARK: Old values

    @Test func changesCarryOldValuesWhenAskedFor() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "m", value: ["color": "a", "style": ["border": 1, "fill": 2]])])
        let withOld = FakeSink(), without = FakeSink()
        try subscribe(push, withOld, Options(paths: [["style", "border"], ["color"]], old: true))
        try subscribe(push, without, Options(paths: [["style", "border"], ["color"]]))
        try store.commit([.put(model: "m", value: ["color": "b", "style": ["border": 3, "fill": 2]])])
        try store.commit([.put(model: "n", value: ["color": "c", "size": 1])])
        try store.commit([.set(model: "m", keyPath: "color", value: nil)])
        push.drain()
        #expect(try changes(withOld, 1) == [
            ["model": "m", "path": "color", "kind": "updated", "value": "b", "old": "a"],
            ["model": "m", "path": "style.border", "kind": "updated", "value": 3, "old": 1],
        ])
        #expect(try changes(withOld, 2) == [["model": "n", "path": "", "kind": "created", "value": ["color": "c"], "old": nil]])
        #expect(try changes(withOld, 3) == [["model": "m", "path": "color", "kind": "deleted", "value": nil, "old": "b"]])
        #expect(try changes(without, 1) == [
            ["model": "m", "path": "color", "kind": "updated", "value": "b"],
            ["model": "m", "path": "style.border", "kind": "updated", "value": 3],
        ])
        #expect(withOld.trace == without.trace)
    }

    @Test func aCoalescedOldIsTheValueBeforeTheFirstChangeFoldedIn() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "m", value: ["color": "a", "size": 1])])
        let sink = FakeSink()
        try subscribe(push, sink, Options(models: ["m"], maxRate: 4, old: true))
        try store.commit([.set(model: "m", keyPath: "color", value: "b")])
        push.drain()
        #expect(try changes(sink, 1) == [["model": "m", "path": "color", "kind": "updated", "value": "b", "old": "a"]])
        try store.commit([.set(model: "m", keyPath: "color", value: "c")])
        try store.commit([.set(model: "m", keyPath: "size", value: 2)])
        try store.commit([.set(model: "m", keyPath: "color", value: "d")])
        push.context.advance(by: 0.25)
        push.drain()
        // Changes at different paths, in whatever order: each stands on its own.
        #expect(try unorderedChanges(sink, 2) == [
            ["model": "m", "path": "color", "kind": "updated", "value": "d", "old": "b"],
            ["model": "m", "path": "size", "kind": "updated", "value": 2, "old": 1],
        ])
        // On resume, the same: the value before the first change the frame holds.
        let resumed = FakeSink()
        try subscribe(push, resumed, Options(models: ["m"], maxRate: 4, old: true), since: 1)
        #expect(resumed.trace == ["subscribed s 1 resumed", "changes s 5 conflated from 1"])
        #expect(try unorderedChanges(resumed, 1) == [
            ["model": "m", "path": "color", "kind": "updated", "value": "d", "old": "a"],
            ["model": "m", "path": "size", "kind": "updated", "value": 2, "old": 1],
        ])
    }

    @Test func aPathCreatedWithinAFrameIsSentAsCreatedWithoutAnOldValue() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "m", value: ["color": "a"])])
        let sink = FakeSink()
        try subscribe(push, sink, Options(models: ["m"], maxRate: 4, old: true))
        try store.commit([.set(model: "m", keyPath: "color", value: "b")])
        push.drain()
        try store.commit([.set(model: "m", keyPath: "size", value: 1)])
        try store.commit([.set(model: "m", keyPath: "size", value: 2)])
        push.context.advance(by: 0.25)
        push.drain()
        #expect(sink.trace.last == "changes s 4 conflated from 2")
        #expect(try changes(sink, 2) == [["model": "m", "path": "size", "kind": "created", "value": 2, "old": nil]])
    }

    /// A coalesced change's `old` is the value before the first change folded into it, also when a
    /// later change (here the whole model, put after a change to its color) replaces earlier ones.
    @Test func aCoalescedOldIsBeforeTheFirstChangeEvenWhenALaterOneReplacesIt() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "m", value: ["color": "a", "size": 1])])
        let sink = FakeSink()
        try subscribe(push, sink, Options(models: ["m"], maxRate: 4, old: true))
        try store.commit([.set(model: "m", keyPath: "color", value: "b")])
        push.drain()
        try store.commit([.set(model: "m", keyPath: "color", value: "c")])
        try store.commit([.put(model: "m", value: ["color": "d"])])
        push.context.advance(by: 0.25)
        push.drain()
        #expect(try changes(sink, 2) == [
            ["model": "m", "path": "", "kind": "updated", "value": ["color": "d"], "old": ["color": "b", "size": 1]],
        ])
    }

    // MARK: Slow members

    @Test func aSlowMemberConflatesWithinTheFilterThenGetsOneFrame() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "a", value: ["color": "red", "size": 1]), .put(model: "b", value: ["color": "red"])])
        let options = Options(models: ["a"], paths: [["color"]], old: true)
        let fast = FakeSink(), slow = FakeSink()
        try subscribe(push, fast, options)
        let slowSubscription = try subscribe(push, slow, options)
        slow.limitReached = true
        try store.commit([.set(model: "a", keyPath: "color", value: "blue"), .set(model: "a", keyPath: "size", value: 2)])  // 2
        try store.commit([.set(model: "b", keyPath: "color", value: "blue")])  // 3: filtered out
        try store.commit([.set(model: "a", keyPath: "color", value: "green")])  // 4
        try store.commit([.set(model: "a", keyPath: "size", value: 3)])  // 5: filtered out
        push.drain()
        #expect(fast.trace == ["snapshot s 1", "changes s 2", "changes s 4"])
        #expect(slow.trace == ["snapshot s 1"])
        #expect(slowSubscription.isConflating && slowSubscription.position == 4)

        slow.limitReached = false
        #expect(slowSubscription.flushConflated() == 2, "two change sets passed the filter")
        #expect(slow.trace == ["snapshot s 1", "changes s 4 conflated from 1"])
        #expect(try changes(slow, 1) == [["model": "a", "path": "color", "kind": "updated", "value": "green", "old": "red"]])

        try store.commit([.set(model: "a", keyPath: "color", value: "black")])  // 6
        push.drain()
        #expect(slow.trace.last == "changes s 6" && fast.trace.last == "changes s 6")
        #expect(slow.events.last === fast.events.last)
    }

    @Test func aSlowMemberWithMaxRateFoldsFramesThenGetsOne() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.commit([.put(model: "a", value: ["color": 0, "size": 0])])
        let options = Options(paths: [["color"]], maxRate: 4)
        let fast = FakeSink(), slow = FakeSink()
        try subscribe(push, fast, options)
        let slowSubscription = try subscribe(push, slow, options)
        slow.limitReached = true
        for n in 1...3 {
            try store.commit([.set(model: "a", keyPath: "color", value: .number(JSONNumber(n)))])
            try store.commit([.set(model: "a", keyPath: "size", value: .number(JSONNumber(n)))])
            push.context.advance(by: 0.25)
            push.drain()
        }
        #expect(fast.trace == [
            "snapshot s 1", "changes s 2 conflated from 1", "changes s 4 conflated from 2", "changes s 6 conflated from 4",
        ])
        #expect(slow.trace == ["snapshot s 1"])
        #expect(slowSubscription.isConflating)
        slow.limitReached = false
        #expect(slowSubscription.flushConflated() == 3, "three frames folded")
        #expect(slow.trace == ["snapshot s 1", "changes s 6 conflated from 1"])
        #expect(try changes(slow, 1) == [["model": "a", "path": "color", "kind": "updated", "value": 3]])
    }

    // MARK: Replica resets

    @Test(arguments: [nil, 4.0] as [Double?])
    func aReplicaResetGivesMembersAProjectedResetSnapshot(maxRate: Double?) throws {
        let push = PushFixture(replication: FakeReplication())
        let store = try push.createStore("s")
        #expect(store.applyReplicated(version: 1, committedAt: 0, changes: [
            ReplicatedChange(model: "m", keyPath: .whole, value: ["color": "red", "n": 1]),
            ReplicatedChange(model: "x", keyPath: .whole, value: ["color": "red"]),
        ]))
        let options = Options(models: ["m"], paths: [["color"]], maxRate: maxRate)
        let first = FakeSink(), second = FakeSink()
        let subscriptions = [try subscribe(push, first, options), try subscribe(push, second, options)]
        #expect(try first.json(0)["models"] == ["m": ["color": "red"]])

        store.resetReplica(models: ["m": ["color": "blue", "n": 5], "y": ["color": "green"]], version: 10)
        push.context.advance(by: 1)
        push.drain()
        #expect(first.trace == ["snapshot s 1", "snapshot s 10 reset"])
        #expect(second.trace == first.trace)
        #expect(first.entries[1].via == .owed)
        #expect(try first.json(1) == [
            "type": "snapshot", "store": "s", "version": 10, "epoch": .string(store.epoch), "reset": true,
            "models": ["m": ["color": "blue"]],
        ])
        #expect(first.events[1] === second.events[1], "one reset snapshot for the group")
        #expect(subscriptions.map(\.position) == [10, 10])

        // A reset that changes nothing the filter keeps still resets: the versions moved.
        store.resetReplica(models: ["m": ["color": "blue", "n": 6], "z": [:]], version: 20)
        push.context.advance(by: 1)
        push.drain()
        #expect(first.trace == ["snapshot s 1", "snapshot s 10 reset", "snapshot s 20 reset"])
        #expect(try first.json(2)["models"] == ["m": ["color": "blue"]])

        #expect(store.applyReplicated(version: 21, committedAt: 0, changes: [ReplicatedChange(model: "m", keyPath: "color", value: "black")]))
        push.context.advance(by: 1)
        push.drain()
        #expect(first.trace.last == (maxRate == nil ? "changes s 21" : "changes s 21 conflated from 20"))
        #expect(second.trace == first.trace)
        #expect(subscriptions.map(\.position) == [21, 21])
    }
}

/// A client's copy of the store, kept by the rules of `docs/PROTOCOL.md` from the events a sink
/// was given: a snapshot replaces it; a change sets the value at its path (creating the model and
/// missing objects) or, when `deleted`, removes it, and then drops the objects left empty above
/// the listed path it lies under.
private struct ClientCopy {
    let sink: FakeSink
    let paths: [ModelKeyPath]?
    var models: [String: JSONValue] = [:]
    var version: UInt64 = 0
    private var read = 0

    init(_ sink: FakeSink, paths: [ModelKeyPath]?) throws {
        self.sink = sink
        self.paths = paths
        try catchUp()
    }

    /// Applies the events the sink was given since the last call.
    mutating func catchUp() throws {
        while read < sink.entries.count {
            let json = try sink.json(read)
            read += 1
            switch json["type"]?.stringValue {
            case "snapshot":
                models = [:]
                for (id, value) in json["models"]?.objectValue ?? [:] { models[id] = value }
            case "changes":
                for change in json["changes"].map(items) ?? [] { apply(change) }
            default:
                continue
            }
            version = json["version"]?.uint64Value ?? version
        }
    }

    private mutating func apply(_ change: JSONValue) {
        guard let id = change["model"]?.stringValue, let text = change["path"]?.stringValue,
              let path = ModelKeyPath(parsing: text)
        else { return }
        let components = path.components
        guard change["kind"] == "deleted" else {
            let value = change["value"] ?? .null
            if components.isEmpty {
                models[id] = value
            } else {
                var model = models[id] ?? .object([:])
                model.setValue(value, at: components[...])
                models[id] = model
            }
            return
        }
        if components.isEmpty {
            models[id] = nil
            return
        }
        guard var model = models[id] else { return }
        model.setValue(nil, at: components[...])
        if let listed = paths?.first(where: { $0.isPrefix(of: path) }) {
            var depth = listed.components.count - 1
            while depth > 0, model.value(at: listed.components.prefix(depth)) == .object([:]) {
                model.setValue(nil, at: listed.components.prefix(depth))
                depth -= 1
            }
        }
        models[id] = model
    }
}

/// JSON equality: an object's members compared whatever their order.
private func unordered(_ value: JSONValue) -> JSONValue {
    switch value {
    case .object(let members):
        .object(JSONObject(uniqueKeysWithValues: members.map { ($0.key, unordered($0.value)) }.sorted { $0.0 < $1.0 }))
    case .array(let items): .array(items.map(unordered))
    default: value
    }
}

private func unordered(_ models: [String: JSONValue]) -> [String: JSONValue] { models.mapValues(unordered) }

/// The items of a JSON array; none for anything else.
private func items(_ value: JSONValue) -> [JSONValue] {
    if case .array(let items) = value { return items }
    return []
}
