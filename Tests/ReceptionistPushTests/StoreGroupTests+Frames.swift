@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

/// Store groups' frames: they converge to the projected store, carry old values when asked, and
/// fold for a slow member or a replica's reset.
extension StoreGroupTests {
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
        let frame = try #require(try changes(sink, sink.entries.count - 1).map(Self.items))
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
            "filter": ["models": ["m"], "paths": ["color"]], "models": ["m": ["color": "blue"]],
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
                for change in json["changes"].map(StoreGroupTests.items) ?? [] { apply(change) }
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
