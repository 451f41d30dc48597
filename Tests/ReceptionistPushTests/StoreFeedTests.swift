@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistTestSupport
import ReceptionistWire
import Testing

@Suite struct StoreFeedTests {
    /// Where an array's bytes live: equal for two copies of one encoded buffer, not for two encodings.
    private func storage(_ bytes: [UInt8]) -> UnsafePointer<UInt8>? {
        bytes.withUnsafeBufferPointer { $0.baseAddress }
    }

    // MARK: Fan-out

    @Test func everyPendingChangeSetArrivesInOrderInOneDelivery() throws {
        let store = ModelStore(name: "s")
        let context = ManualContext(), counters = PushCounters()
        let feed = StoreFeed(store: store, context: context, historyLimit: 100, counters: counters)
        let sink = FakeSink()
        feed.add(Subscription(target: .store("s"), sink: sink))
        #expect(feed.subscriberCount == 1 && store.observerCount == 1)
        for n in 1...4 { try store.put("m", n) }
        #expect(context.wakeups == 1)
        #expect(withExtendedLifetime(feed) { context.drain() } == 1)
        #expect(sink.trace == ["changes s 1", "changes s 2", "changes s 3", "changes s 4"])
        #expect(counters.deliveries == 4 && counters.changeSetsFannedOut == 4)
    }

    @Test func aFeedWithoutSubscribersDeliversAndCountsNothing() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let sink = FakeSink()
        push.hub.unsubscribe(try push.subscribe(sink, .store("s")))
        #expect(push.hub.feeds["s"]?.subscriberCount == 0)
        try store.put("m", 1)
        push.drain()
        #expect(sink.trace == ["snapshot s 0"])
        #expect(push.counters.deliveries == 0 && push.counters.changeSetsFannedOut == 0)
    }

    @Test func aReleasedFeedStopsObservingItsStore() throws {
        let store = ModelStore(name: "s")
        let context = ManualContext()
        var feed: StoreFeed? = StoreFeed(store: store, context: context, historyLimit: 100, counters: PushCounters())
        #expect(store.observerCount == 1 && feed != nil)
        feed = nil
        #expect(store.observerCount == 0)
        try store.put("m", 1)
        #expect(context.pending == 0)
    }

    /// Groups whose options differ only in `maxRate` or `old` send the same snapshot: one event,
    /// built once, not one copy of the store per group (100 such groups of an 8 MB store held
    /// 1.5 GB). A filtered group's snapshot is its own.
    @Test func unfilteredGroupsShareOneSnapshot() throws {
        let store = ModelStore(name: "s")
        try store.put("m", 1)
        let feed = StoreFeed(store: store, context: ManualContext(), historyLimit: 100, counters: PushCounters())
        let plain = feed.group(for: .none).snapshot(reset: false)
        let rated = feed.group(for: SubscriptionOptions(maxRate: 2)).snapshot(reset: false)
        let old = feed.group(for: SubscriptionOptions(old: true)).snapshot(reset: false)
        #expect(plain === rated && plain === old)
        let filtered = feed.group(for: SubscriptionOptions(models: ["m"])).snapshot(reset: false)
        #expect(filtered !== plain && String(decoding: filtered.json, as: UTF8.self).contains("\"filter\":{\"models\":[\"m\"]}"))
        // A new version: built again, once.
        try store.put("m", 2)
        let next = feed.group(for: SubscriptionOptions(maxRate: 2)).snapshot(reset: false)
        #expect(next !== plain && next === feed.group(for: .none).snapshot(reset: false))
        withExtendedLifetime(feed) {}
    }

    // MARK: Replica resets

    @Test func aResetGivesEverySubscriberOneResetSnapshot() throws {
        let push = PushFixture(replication: FakeReplication())
        let store = try push.createStore("s")
        for version: UInt64 in 1...2 {
            #expect(store.applyReplicated(version: version, committedAt: 0, changes: replicatedPut("m", Int(version))))
        }
        let fresh = FakeSink(), resumed = FakeSink(), slow = FakeSink()
        let subscriptions = [
            try push.subscribe(fresh, .store("s")), try push.subscribe(resumed, .store("s"), since: 1), try push.subscribe(slow, .store("s")),
        ]
        slow.limitReached = true
        #expect(store.applyReplicated(version: 3, committedAt: 0, changes: replicatedPut("m", 3)))
        push.drain()
        #expect(subscriptions[2].isConflating)

        store.resetReplica(models: ["x": ["n": 9]], version: 10)
        push.drain()
        #expect(fresh.trace == ["snapshot s 2", "changes s 3", "snapshot s 10 reset"])
        #expect(resumed.trace == ["subscribed s 1 resumed", "changes s 2", "changes s 3", "snapshot s 10 reset"])
        #expect(slow.trace == ["snapshot s 2", "snapshot s 10 reset"], "owed, over the limit or not")
        #expect(try fresh.json(2) == [
            "type": "snapshot", "store": "s", "version": 10, "epoch": .string(store.epoch), "reset": true, "models": ["x": ["n": 9]],
        ])
        #expect(fresh.events[2] === resumed.events[3] && fresh.events[2] === slow.events[1], "one reset snapshot for all")
        #expect(subscriptions.map(\.position) == [10, 10, 10])
        #expect(!subscriptions[2].isConflating, "what was conflated belongs to the state before the reset")
        #expect(subscriptions[2].flushConflated() == 0)

        slow.limitReached = false
        #expect(store.applyReplicated(version: 11, committedAt: 0, changes: replicatedPut("x", 10)))
        push.drain()
        for sink in [fresh, resumed, slow] { #expect(sink.trace.last == "changes s 11") }
    }

    @Test func changeSetsAfterAResetInTheSameDeliveryAreCoveredByItsSnapshot() throws {
        let push = PushFixture(replication: FakeReplication())
        let store = try push.createStore("s")
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .store("s"))
        #expect(store.applyReplicated(version: 1, committedAt: 0, changes: replicatedPut("m", 1)))
        store.resetReplica(models: ["x": ["n": 1]], version: 10)
        #expect(store.applyReplicated(version: 11, committedAt: 0, changes: replicatedPut("x", 2)))
        #expect(push.drain() == 1)
        // The snapshot is read when the loop gets to the reset, so it already holds version 11.
        #expect(sink.trace == ["snapshot s 0", "changes s 1", "snapshot s 11 reset"])
        #expect(try sink.json(2)["models"] == ["x": ["n": 2]])
        #expect(subscription.position == 11)
    }

    /// A change set made before a reset into a new epoch goes out in the epoch it was made in,
    /// though the loop gets to it after the reset: its SSE `id` (`1@<epoch>`) names what it is.
    /// Before, it was labelled with the store's epoch by then, and a client resuming from it was
    /// taken for one already in the new epoch.
    @Test func aChangeSetBeforeAResetIntoANewEpochKeepsItsOwnEpoch() throws {
        let push = PushFixture(replication: FakeReplication())
        let store = try push.createStore("s")
        let old = store.epoch
        let sink = FakeSink()
        try push.subscribe(sink, .store("s"))
        #expect(store.applyReplicated(version: 1, committedAt: 0, changes: replicatedPut("m", 1)))
        store.resetReplica(models: [:], version: 0, epoch: "e2")
        push.drain()
        #expect(sink.trace == ["snapshot s 0", "changes s 1", "snapshot s 0 reset"])
        #expect(sink.events[1].epoch == old)
        #expect(sink.events[2].epoch == "e2")
    }

    // MARK: Snapshot cache

    @Test func subscribersAtOneVersionShareOneEncodedSnapshot() throws {
        let push = PushFixture(storeHistory: 1)
        let store = try push.createStore("s")
        try store.put("m", 1)
        try store.put("m", 2)
        let first = FakeSink(), second = FakeSink(), later = FakeSink(), reset1 = FakeSink(), reset2 = FakeSink()
        try push.subscribe(first, .store("s"))
        try push.subscribe(second, .store("s"))
        #expect(first.trace == ["snapshot s 2"] && second.trace == ["snapshot s 2"])
        #expect(first.events[0].json == second.events[0].json)
        #expect(storage(first.events[0].json) == storage(second.events[0].json), "encoded once, not twice")

        // A snapshot marked reset is another message.
        try push.subscribe(reset1, .store("s"), since: 0)
        try push.subscribe(reset2, .store("s"), since: 0)
        #expect(reset1.trace == ["snapshot s 2 reset"] && reset2.trace == ["snapshot s 2 reset"])
        #expect(storage(reset1.events[0].json) == storage(reset2.events[0].json))
        #expect(reset1.events[0].json != first.events[0].json)

        try store.put("m", 3)
        try push.subscribe(later, .store("s"))
        #expect(later.trace == ["snapshot s 3"])
        #expect(try later.json(0)["models"] == ["m": ["n": 3]])
    }

    /// A replica can be reset to a version it had before with other models (the log went back in
    /// time, or was rebuilt), so the version alone does not name a snapshot.
    @Test func aReplicaResetToAnEarlierVersionIsNotAnsweredFromTheCache() throws {
        let push = PushFixture(replication: FakeReplication())
        let store = try push.createStore("s")
        #expect(store.applyReplicated(version: 1, committedAt: 0, changes: replicatedPut("m", 1)))
        #expect(store.applyReplicated(version: 2, committedAt: 0, changes: replicatedPut("m", 2)))
        let before = FakeSink()
        push.hub.unsubscribe(try push.subscribe(before, .store("s")))  // snapshot at 2 encoded, cached
        #expect(try before.json(0)["models"] == ["m": ["n": 2]])
        #expect(store.applyReplicated(version: 3, committedAt: 0, changes: replicatedPut("m", 3)))

        store.resetReplica(models: ["other": ["n": 7]], version: 2)
        push.drain()
        let after = FakeSink()
        try push.subscribe(after, .store("s"))
        #expect(after.trace == ["snapshot s 2"])
        let models = try after.json(0)["models"]
        #expect(models == ["other": ["n": 7]], "the store's models now, not the cached ones")
    }

    /// After a replica reset, versions are numbered again; a resume that arrives before the reset
    /// reaches the feed must replay the store's change sets, not the feed's events of the same
    /// numbers from the store's earlier life.
    @Test func aReplayAfterAResetIsNotAnsweredWithEventsOfTheEarlierLife() throws {
        let push = PushFixture(replication: FakeReplication())
        let store = try push.createStore("s")
        let live = FakeSink()
        try push.subscribe(live, .store("s"))
        for version: UInt64 in 1...3 {
            #expect(store.applyReplicated(version: version, committedAt: version, changes: replicatedPut("m", Int(version))))
        }
        push.drain()  // the feed now holds its events for versions 1 to 3
        store.resetReplica(models: ["m": ["n": 1]], version: 1)
        #expect(store.applyReplicated(version: 2, committedAt: 200, changes: replicatedPut("m", 20)))
        let resumed = FakeSink()
        try push.subscribe(resumed, .store("s"), since: 1, epoch: store.epoch)  // before the reset is drained
        let replayed = resumed.events.filter { $0.name == "changes" }
        #expect(replayed.map(\.id) == [2])
        #expect(try JSONParser.parse(replayed[0].json)["changes"] == [["model": "m", "path": "", "kind": "updated", "value": ["n": 20]]])
    }

    @Test func aResetSnapshotAtACachedVersionCarriesTheNewModels() throws {
        let push = PushFixture(storeHistory: 1, replication: FakeReplication())
        let store = try push.createStore("s")
        for version: UInt64 in 1...3 {
            #expect(store.applyReplicated(version: version, committedAt: 0, changes: replicatedPut("m", Int(version))))
        }
        let sink = FakeSink()
        try push.subscribe(sink, .store("s"), since: 1)  // too old: a reset snapshot at 3, cached
        #expect(sink.trace == ["snapshot s 3 reset"])

        store.resetReplica(models: ["other": ["n": 7]], version: 3)
        push.drain()
        #expect(sink.trace == ["snapshot s 3 reset", "snapshot s 3 reset"])
        let models = try sink.json(1)["models"]
        #expect(models == ["other": ["n": 7]], "the store's models now, not the cached ones")
    }
}
