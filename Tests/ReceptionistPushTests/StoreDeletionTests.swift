@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire
import Testing

@Suite struct StoreDeletionTests {
    @Test func aDeletedStoresSubscribersAreToldAndEndedAndANewStoreOfTheNameIsANewFeed() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        try store.put("a", 1)
        let whole = FakeSink(), narrowed = FakeSink(), other = FakeSink()
        let first = try push.subscribe(whole, .store("s"))
        let second = try push.hub.subscribe(
            narrowed, to: .store("s"), since: nil, options: SubscriptionOptions(models: ["a"])).get()
        try push.createStore("t")
        try push.subscribe(other, .store("t"))

        try push.stores.delete("s")
        push.hub.storeDeleted("s")
        #expect(try whole.json(whole.events.count - 1) == ["type": "unsubscribed", "store": "s", "reason": "deleted"])
        #expect(try narrowed.json(narrowed.events.count - 1) == ["type": "unsubscribed", "store": "s", "reason": "deleted"])
        #expect(whole.ended.map(ObjectIdentifier.init) == [ObjectIdentifier(first)])
        #expect(narrowed.ended.map(ObjectIdentifier.init) == [ObjectIdentifier(second)])
        #expect(other.ended.isEmpty)
        #expect(push.hub.feeds["s"] == nil)
        // The old store's observers are gone: a late commit to it reaches nobody.
        #expect(store.observerCount == 0)

        let again = try push.createStore("s")
        #expect(again.epoch != store.epoch && again.version == 0)
        let fresh = FakeSink()
        try push.subscribe(fresh, .store("s"))
        try again.put("b", 2)
        push.drain()
        #expect(fresh.trace == ["snapshot s 0", "changes s 1"])
        #expect(whole.trace.last == "unsubscribed s")
    }

    /// A store deleted and made again before the delete reaches the loop: the first subscriber of
    /// the new store ends the old feed, whose subscribers are told, and the late delete, of the old
    /// store, leaves the new feed alone. (The old subscriber heard nothing and could not subscribe
    /// again; the delete then ended the new store's subscribers.)
    @Test func aStoreMadeAgainBeforeItsDeleteReachesTheLoopEndsTheOldFeedOnly() throws {
        let push = PushFixture()
        let old = try push.createStore("s")
        let before = FakeSink()
        let first = try push.subscribe(before, .store("s"))
        try push.stores.delete("s")
        let again = try push.createStore("s")
        let after = FakeSink()
        try push.subscribe(after, .store("s"))
        #expect(try before.json(before.events.count - 1) == ["type": "unsubscribed", "store": "s", "reason": "deleted"])
        #expect(before.ended.map(ObjectIdentifier.init) == [ObjectIdentifier(first)])

        push.hub.storeDeleted("s", store: old)
        #expect(after.ended.isEmpty && push.hub.feeds["s"]?.store === again)
        try again.put("b", 2)
        push.drain()
        #expect(after.trace == ["snapshot s 0", "changes s 1"])
    }

    /// A node hears of a cluster store's deletion with the epoch it had: its replica goes only if
    /// it is that store, never one made again under the name since.
    @Test func aReplicaIsDroppedOnlyForTheEpochDeleted() {
        let stores = StoreRegistry(replication: FakeReplication())
        let old = stores.replica("s")
        old.resetReplica(models: [:], version: 3, epoch: "00aa")
        #expect(!stores.dropReplica("s", epoch: "00bb"))
        #expect(stores.store("s") === old)
        #expect(stores.dropReplica("s", epoch: "00aa"))
        #expect(stores.store("s") == nil)
        #expect(!stores.dropReplica("s", epoch: "00aa"), "already gone")

        let again = stores.replica("s")
        again.resetReplica(models: [:], version: 0, epoch: "00cc")
        #expect(!stores.dropReplica("s", epoch: "00aa"), "a late notice of the old store")
        #expect(stores.store("s") === again)
        #expect(stores.dropReplica("s", epoch: nil))
    }
    /// A store deleted on a job thread while the loop subscribes to it: each subscribe either
    /// succeeds or is refused `no_such_store`. The store was looked up three times, and a delete
    /// between the first look and the last crashed the process.
    @Test func aStoreDeletedWhileTheLoopSubscribesIsRefusedNeverACrash() throws {
        let push = PushFixture()
        let done = ConditionLock(false)
        let stores = push.stores
        let churn = WorkerThread.start {
            while !done.withLock({ $0 }) {
                _ = try? stores.create("s")
                _ = try? stores.delete("s")
            }
        }
        var subscribed = 0, refused = 0
        let deadline = Clock.monotonicSeconds() + 0.5
        while Clock.monotonicSeconds() < deadline {
            switch push.hub.subscribe(FakeSink(), to: .store("s"), since: nil) {
            case .success(let subscription):
                subscribed += 1
                push.hub.unsubscribe(subscription)
            case .failure(let problem):
                #expect(problem.code == .noSuchStore)
                refused += 1
            }
            if push.stores.store("s") == nil { push.hub.storeDeleted("s") }
        }
        done.withLock { $0 = true }
        churn.join()
        #expect(subscribed > 0 && refused > 0, "both outcomes were reached")
    }
}
