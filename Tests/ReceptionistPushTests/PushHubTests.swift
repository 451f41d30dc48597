@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

@Suite struct PushHubTests {
    // MARK: Stores: hand-over from snapshot to live (invariant 18)

    @Test func aFreshSubscriptionGetsTheSnapshotThenEveryLaterChangeSetOnce() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.put("a", 1)
        try store.put("b", 2)
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .store("s"))
        #expect(sink.owed == ["snapshot s 2"])
        #expect(try sink.json(0) == [
            "type": "snapshot", "store": "s", "version": 2, "epoch": .string(store.epoch), "reset": false,
            "models": ["a": ["n": 1], "b": ["n": 2]],
        ])

        try store.put("a", 3)
        try store.commit([.set(model: "b", keyPath: "n", value: 4)])
        try store.commit([.delete(model: "a")])
        #expect(sink.trace == ["snapshot s 2"], "nothing is delivered before the loop runs the receptionist's job")
        #expect(push.drain() == 1, "three commits, one wake-up")

        #expect(sink.trace == ["snapshot s 2", "changes s 3", "changes s 4", "changes s 5"])
        #expect(sink.sent == ["changes s 3", "changes s 4", "changes s 5"])
        #expect(try sink.json(2)["changes"] == [["model": "b", "path": "n", "kind": "updated", "value": 4]])
        #expect(try sink.json(3)["changes"] == [["model": "a", "path": "", "kind": "deleted", "value": nil]])
        #expect(subscription.position == 5)
        #expect(push.counters.deliveries == 3 && push.counters.changeSetsFannedOut == 3)
        #expect(push.counters.storeResumes == 0 && push.counters.resets == 0)
        #expect(push.hub.storeSubscriberCount == 1)

        #expect(push.drain() == 0)
        #expect(sink.trace.count == 4, "nothing is delivered twice")
    }

    @Test func aChangeSetTheSnapshotCoveredIsNotDeliveredAgain() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let early = FakeSink(), late = FakeSink()
        try push.subscribe(early, .store("s"))  // the feed, and its receptionist, exist from here
        try store.put("a", 1)  // version 1: queued for the loop, not yet delivered
        #expect(push.context.pending == 1)

        try push.subscribe(late, .store("s"))  // its snapshot, read now, already holds version 1
        try store.put("a", 2)
        push.drain()

        #expect(early.trace == ["snapshot s 0", "changes s 1", "changes s 2"])
        #expect(late.trace == ["snapshot s 1", "changes s 2"])
        #expect(try late.json(0)["models"] == ["a": ["n": 1]])
        #expect(push.counters.deliveries == 3)
    }

    // MARK: Stores: resume

    @Test func aResumeInsideTheHistoryReplaysExactlyWhatWasMissed() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        for n in 1...5 { try store.put("m", n) }
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .store("s"), since: 2, epoch: store.epoch)
        #expect(sink.trace == ["subscribed s 2 resumed", "changes s 3", "changes s 4", "changes s 5"])
        #expect(sink.owed == ["subscribed s 2 resumed"])
        #expect(try sink.json(0) == ["type": "subscribed", "store": "s", "version": 2, "epoch": .string(store.epoch), "resumed": true])
        #expect(try sink.json(3)["changes"] == [["model": "m", "path": "", "kind": "updated", "value": ["n": 5]]])
        #expect(subscription.position == 5)
        #expect(push.counters.storeResumes == 1 && push.counters.resets == 0)

        try store.put("m", 6)
        push.drain()
        #expect(sink.trace == ["subscribed s 2 resumed", "changes s 3", "changes s 4", "changes s 5", "changes s 6"])
    }

    @Test func aChangeSetTheReplayCoveredIsNotDeliveredAgain() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.put("m", 1)
        let first = FakeSink(), resumed = FakeSink()
        try push.subscribe(first, .store("s"))
        try store.put("m", 2)  // in the history, and queued for the loop
        try push.subscribe(resumed, .store("s"), since: 1)
        push.drain()
        #expect(resumed.trace == ["subscribed s 1 resumed", "changes s 2"])
        #expect(first.trace == ["snapshot s 1", "changes s 2"])
    }

    @Test func aResumeAtTheCurrentVersionReplaysNothing() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        for n in 1...3 { try store.put("m", n) }
        let sink = FakeSink()
        try push.subscribe(sink, .store("s"), since: 3)
        #expect(sink.trace == ["subscribed s 3 resumed"])
        try store.put("m", 4)
        push.drain()
        #expect(sink.trace == ["subscribed s 3 resumed", "changes s 4"])
        #expect(push.counters.storeResumes == 1)
    }

    @Test func aResumeOlderThanTheHistoryGetsAResetSnapshot() throws {
        let push = PushFixture(storeHistory: 2)
        let store = try push.createStore("s")
        for n in 1...5 { try store.put("m", n) }
        let tooOld = FakeSink(), justInside = FakeSink()
        let subscription = try push.subscribe(tooOld, .store("s"), since: 2)
        try push.subscribe(justInside, .store("s"), since: 3)
        #expect(tooOld.owed == ["snapshot s 5 reset"])
        #expect(try tooOld.json(0)["models"] == ["m": ["n": 5]])
        #expect(subscription.position == 5)
        #expect(justInside.trace == ["subscribed s 3 resumed", "changes s 4", "changes s 5"])
        #expect(push.counters.resets == 1 && push.counters.storeResumes == 1)

        try store.put("m", 6)
        push.drain()
        #expect(tooOld.trace == ["snapshot s 5 reset", "changes s 6"])
    }

    @Test func aResumeFromAnotherEpochOrTheFutureGetsAResetSnapshot() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        for n in 1...4 { try store.put("m", n) }
        let otherEpoch = FakeSink(), future = FakeSink(), sameEpoch = FakeSink()
        try push.subscribe(otherEpoch, .store("s"), since: 2, epoch: "0123456789abcdef")
        try push.subscribe(future, .store("s"), since: 9, epoch: store.epoch)
        try push.subscribe(sameEpoch, .store("s"), since: 2, epoch: store.epoch)
        #expect(otherEpoch.trace == ["snapshot s 4 reset"])
        #expect(try otherEpoch.json(0)["epoch"] == .string(store.epoch))
        #expect(future.trace == ["snapshot s 4 reset"])
        #expect(sameEpoch.trace == ["subscribed s 2 resumed", "changes s 3", "changes s 4"])
        #expect(push.counters.resets == 2 && push.counters.storeResumes == 1)
    }

    /// A replica with a history of two change sets, at version 5, and a shared log beside it.
    private func replicaWithShortHistory() throws -> (PushFixture, ModelStore, FakeStoreSource) {
        let push = PushFixture(storeHistory: 2, replication: FakeReplication())
        let source = FakeStoreSource()
        push.hub.storeSource = source
        let store = try push.createStore("s")
        for version: UInt64 in 1...5 {
            #expect(store.applyReplicated(version: version, committedAt: 0, changes: replicatedPut("m", Int(version))))
        }
        push.drain()
        return (push, store, source)
    }

    @Test func aStoreResumeOlderThanTheReplicaHistoryIsReadFromTheSharedLog() throws {
        let (push, store, source) = try replicaWithShortHistory()
        let sink = FakeSink()
        _ = try push.subscribe(sink, .store("s"), since: 1, epoch: store.epoch)
        // Nothing is sent until the log answers.
        #expect(sink.trace.isEmpty && source.lookups.count == 1)
        #expect(source.lookups[0].after == 1 && source.lookups[0].through == 5)
        source.answer(2...5)
        #expect(sink.trace == ["subscribed s 1 resumed", "changes s 2", "changes s 3", "changes s 4", "changes s 5"])
        // Then live.
        #expect(store.applyReplicated(version: 6, committedAt: 0, changes: replicatedPut("m", 6)))
        push.drain()
        #expect(sink.trace.last == "changes s 6")
        #expect(push.counters.storeResumes == 1 && push.counters.resets == 0)
    }

    /// A store deleted while a resume waits for the shared log: the resuming subscriber is told
    /// as the members are (`unsubscribed`, its subscription ended), not left without an answer.
    @Test func aResumeWaitingForTheSharedLogIsToldOfTheStoresDeletion() throws {
        let (push, store, source) = try replicaWithShortHistory()
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .store("s"), since: 1, epoch: store.epoch)
        push.hub.storeDeleted("s")
        #expect(sink.trace == ["unsubscribed s"])
        #expect(sink.ended.map(ObjectIdentifier.init) == [ObjectIdentifier(subscription)])
        source.answer(2...5)
        #expect(sink.trace == ["unsubscribed s"], "the late answer reaches nobody")
    }

    /// A group whose last member leaves while another subscriber resumes is closed once that
    /// resume ends: it filtered every commit, and counted against the store's groups, for good.
    @Test func aGroupLeftEmptyDuringAResumeIsClosedWhenTheResumeEnds() throws {
        let (push, store, source) = try replicaWithShortHistory()
        let leaving = FakeSink(), resuming = FakeSink()
        let narrowed = try push.hub.subscribe(leaving, to: .store("s"), since: nil, options: SubscriptionOptions(models: ["m"])).get()
        #expect(push.hub.storeGroupCount == 2)
        _ = try push.subscribe(resuming, .store("s"), since: 1, epoch: store.epoch)
        push.hub.unsubscribe(narrowed)
        #expect(push.hub.storeGroupCount == 2, "kept while a resume may join it")
        source.answer(2...5)
        #expect(resuming.trace.first == "subscribed s 1 resumed")
        #expect(push.hub.storeGroupCount == 1)
    }

    @Test func whatTheSharedLogNoLongerHoldsIsAResetNeverAHole() throws {
        let (push, store, source) = try replicaWithShortHistory()
        let trimmed = FakeSink(), unreadable = FakeSink()
        _ = try push.subscribe(trimmed, .store("s"), since: 1, epoch: store.epoch)
        _ = try push.subscribe(unreadable, .store("s"), since: 1, epoch: store.epoch)
        source.answer(3...5)  // version 2 was trimmed
        source.answer(nil)  // Redis did not answer in time
        #expect(trimmed.trace == ["snapshot s 5 reset"])
        #expect(unreadable.trace == ["snapshot s 5 reset"])
        #expect(push.counters.resets == 2 && push.counters.storeResumes == 0)
    }

    @Test func aReplicaThatMovedOnDuringTheLookupIsAskedAboutAgain() throws {
        let (push, store, source) = try replicaWithShortHistory()
        let sink = FakeSink()
        _ = try push.subscribe(sink, .store("s"), since: 1, epoch: store.epoch)
        // Three more change sets arrive while the log is read: the history (2) no longer reaches 5.
        for version: UInt64 in 6...8 {
            #expect(store.applyReplicated(version: version, committedAt: 0, changes: replicatedPut("m", Int(version))))
        }
        push.drain()
        source.answer(2...5)
        #expect(sink.trace.isEmpty && source.lookups.first?.after == 5 && source.lookups.first?.through == 8)
        source.answer(6...8)
        #expect(sink.trace == (["subscribed s 1 resumed"] + (2...8).map { "changes s \($0)" }))
    }

    @Test func aSubscriberThatLeavesDuringTheLookupGetsNothing() throws {
        let (push, store, source) = try replicaWithShortHistory()
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .store("s"), since: 1, epoch: store.epoch)
        push.hub.unsubscribe(subscription)
        source.answer(2...5)
        #expect(sink.trace.isEmpty && push.hub.storeSubscriberCount == 0)
    }

    @Test func aClusterNodeResumesFromAVersionItsReplicaHasNotReachedYet() throws {
        let push = PushFixture(replication: FakeReplication())
        let source = FakeTopicSource()
        push.hub.topicSource = source
        let store = try push.createStore("s")
        #expect(store.applyReplicated(version: 1, committedAt: 0, changes: replicatedPut("m", 1)))
        let sink = FakeSink()
        let subscription = try push.subscribe(sink, .store("s"), since: 3, epoch: store.epoch)
        #expect(sink.trace == ["subscribed s 3 resumed"])
        #expect(subscription.position == 3)
        // Versions 2 and 3 were committed elsewhere; the client has them already.
        for version: UInt64 in 2...4 {
            #expect(store.applyReplicated(version: version, committedAt: 0, changes: replicatedPut("m", Int(version))))
        }
        push.drain()
        #expect(sink.trace == ["subscribed s 3 resumed", "changes s 4"])
        #expect(push.counters.storeResumes == 1 && push.counters.resets == 0)
        withExtendedLifetime(source) {}
    }

    // MARK: Checks, many subscriptions, unsubscribe

    @Test func checkNamesTheProblem() throws {
        let push = PushFixture()
        try push.createStore("s")
        #expect(push.hub.check(.store("s")) == nil)
        #expect(push.hub.check(.store("missing"))?.code == .noSuchStore)
        #expect(push.hub.check(.topic("news.eu-1_b")) == nil)
        #expect(push.hub.check(.topic(String(repeating: "x", count: 64))) == nil)
        for name in ["", "a b", "a/b", "é", String(repeating: "x", count: 65)] {
            #expect(push.hub.check(.topic(name))?.code == .invalidTopic, "topic '\(name)'")
        }

        let sink = FakeSink()
        let noSuchStore = try #require(push.hub.check(.store("missing")))
        let invalidTopic = try #require(push.hub.check(.topic("a b")))
        #expect(throws: noSuchStore) { try push.subscribe(sink, .store("missing")) }
        #expect(throws: invalidTopic) { try push.subscribe(sink, .topic("a b"), since: 3) }
        #expect(push.hub.publish(topic: "a b", data: json(1), publishedAt: 0) == .failure(invalidTopic))
        #expect(sink.trace.isEmpty)
        #expect(push.hub.feeds.isEmpty && push.hub.topics.isEmpty)
    }

    @Test func oneSinkReceivesEachOfItsStreams() throws {
        let push = PushFixture()
        let a = try push.createStore("a"), b = try push.createStore("b")
        try b.put("m", 1)
        let sink = FakeSink()
        let subscriptions = [
            try push.subscribe(sink, .store("a")), try push.subscribe(sink, .store("b")), try push.subscribe(sink, .topic("t")),
        ]
        try a.put("m", 1)
        try b.put("m", 2)
        _ = push.hub.publish(topic: "t", data: json(1), publishedAt: 0)
        try a.put("m", 2)
        push.drain()

        // The topic message is queued as it is published; the stores' change sets when the loop runs.
        #expect(Array(sink.trace.prefix(4)) == ["snapshot a 0", "snapshot b 1", "subscribed t 0", "message t 1"])
        let stores = sink.trace.dropFirst(4)
        #expect(stores.filter { $0.hasPrefix("changes a") } == ["changes a 1", "changes a 2"])
        #expect(stores.filter { $0.hasPrefix("changes b") } == ["changes b 2"])
        #expect(stores.count == 3)
        #expect(subscriptions.map(\.position) == [2, 2, 1])
        #expect(push.hub.storeSubscriberCount == 2 && push.hub.topicSubscriberCount == 1)
        #expect(push.counters.deliveries == 4)
    }

    @Test func unsubscribeStopsDelivery() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let leaving = FakeSink(), staying = FakeSink()
        let storeSubscription = try push.subscribe(leaving, .store("s"))
        let topicSubscription = try push.subscribe(leaving, .topic("t"))
        try push.subscribe(staying, .store("s"))
        try push.subscribe(staying, .topic("t"))
        try store.put("m", 1)
        push.drain()
        _ = push.hub.publish(topic: "t", data: json(1), publishedAt: 0)

        push.hub.unsubscribe(storeSubscription)
        push.hub.unsubscribe(topicSubscription)
        #expect(push.hub.storeSubscriberCount == 1 && push.hub.topicSubscriberCount == 1)
        try store.put("m", 2)
        _ = push.hub.publish(topic: "t", data: json(2), publishedAt: 0)
        push.drain()

        #expect(leaving.trace == ["snapshot s 0", "subscribed t 0", "changes s 1", "message t 1"])
        #expect(staying.trace == ["snapshot s 0", "subscribed t 0", "changes s 1", "message t 1", "message t 2", "changes s 2"])
        #expect(push.counters.deliveries == 6)
    }

    @Test func countersCountEachSubscriberOnce() throws {
        let push = PushFixture(storeHistory: 3, topicHistory: 2)
        let store = try push.createStore("s")
        let sinks = (0..<3).map { _ in FakeSink() }
        for sink in sinks { try push.subscribe(sink, .store("s")) }
        try store.put("m", 1)
        try store.put("m", 2)
        push.drain()
        #expect(push.counters.deliveries == 6 && push.counters.changeSetsFannedOut == 2)

        for n in 3...6 { try store.put("m", n) }
        let reset = FakeSink(), resumed = FakeSink()
        try push.subscribe(reset, .store("s"), since: 1)  // history holds 4...6: reset
        try push.subscribe(resumed, .store("s"), since: 4)
        push.drain()
        #expect(reset.trace == ["snapshot s 6 reset"] && resumed.trace == ["subscribed s 4 resumed", "changes s 5", "changes s 6"])
        #expect(push.counters.resets == 1 && push.counters.storeResumes == 1)
        #expect(push.counters.changeSetsFannedOut == 6)
        #expect(push.counters.deliveries == 6 + 4 * 3, "four change sets to the first three; the others had them")

        for n in 1...4 { _ = push.hub.publish(topic: "t", data: json(.number(JSONNumber(Double(n)))), publishedAt: 0) }
        let gapped = FakeSink(), replayed = FakeSink()
        try push.subscribe(gapped, .topic("t"), since: 1)  // the ring holds 3...4
        try push.subscribe(replayed, .topic("t"), since: 3)
        #expect(gapped.trace == ["subscribed t 4 resumed", "gap t 2...2", "message t 3", "message t 4"])
        #expect(replayed.trace == ["subscribed t 4 resumed", "message t 4"])
        #expect(push.counters.topicResumes == 2 && push.counters.gaps == 1 && push.counters.topicPublishes == 4)
        #expect(push.counters.conflatedChangeSets == 0)
    }
}
