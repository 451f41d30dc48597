import Dispatch
import Logging
@testable import ReceptionistGateway
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistTestSupport
import Synchronization
import Testing

/// The queues a cluster node keeps between Redis and its mirrors (DESIGN.md, "Queues"): the
/// publishes and commits waiting for their number or version, and a store's batches on the replica
/// thread. Driven on a real loop and a real replica thread; Redis is left out (its connection is
/// never started), and entries are handed to the followers as a read hands them.
@Suite struct ClusterFollowerQueueTests {
    /// A publish waiting past `--redis-timeout` was answered by its own deadline: its entry goes at
    /// the next wait, and its message arriving later answers nobody. Within the time-out, both
    /// publishes are answered.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func aPublishWaitingPastItsTimeOutIsDroppedAtTheNextWait(pastTimeOut: Bool) {
        let log = script { loop, note in
            let rig = Rig(loop: loop)
            let follower = TopicFollower(
                name: "t", hub: rig.hub, commands: rig.commands, keys: rig.keys, tail: 10, waitMilliseconds: 50, logger: rig.logger)
            let reader = StreamReader(key: "log", cursor: StreamCursor(), commands: rig.commands, follower: follower, retry: { _ in })
            let epoch = rig.hub.topic("t").epoch
            let waitForTwo = { follower.waitFor(2, epoch: epoch, reader: reader) { note("2: \((try? $0.get()).map(String.init) ?? "failed")") } }
            var started: UInt64 = 0
            return [
                {
                    started = loop.nowMilliseconds
                    if pastTimeOut { waitForTwo() }
                    return true
                },
                {
                    // Within the time-out: both waits in one loop turn, whose clock does not move.
                    if !pastTimeOut { waitForTwo() } else if loop.nowMilliseconds <= started + 50 { return false }
                    follower.waitFor(3, epoch: epoch, reader: reader) { note("3: \((try? $0.get()).map(String.init) ?? "failed")") }
                    let entries = (1...3).map { seq in
                        StreamEntry(id: "\(seq)-0", fields: [.init(name: "s", value: Array("\(seq)".utf8)), .init(name: "d", value: Array("{}".utf8))])
                    }
                    follower.follow(entries, reader: reader)
                    withExtendedLifetime(rig) {}
                    return true
                },
            ]
        }
        #expect(log == (pastTimeOut ? ["3: 3"] : ["2: 2", "3: 3"]))
    }

    /// A commit waiting past `--redis-timeout` for the replica was answered by its own deadline:
    /// its entry goes at the next wait, and the replica reaching its version later answers
    /// nobody. Within the time-out, both commits are answered.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func aCommitWaitingPastItsTimeOutIsDroppedAtTheNextWait(pastTimeOut: Bool) {
        let log = script { loop, note in
            let rig = Rig(loop: loop)
            let (follower, reader) = rig.storeFollower(applier: SerialWorker())
            var started: UInt64 = 0
            var answered = false
            let waitForThree = { follower.whenApplied(3, seconds: 0.05) { _ in note("3") } }
            return [
                {
                    started = loop.nowMilliseconds
                    if pastTimeOut { waitForThree() }
                    return true
                },
                {
                    if !pastTimeOut { waitForThree() } else if loop.nowMilliseconds <= started + 50 { return false }
                    follower.whenApplied(2, seconds: 0.05) { _ in note("2"); answered = true }
                    follower.follow((1...3).map(Rig.changeSetEntry), reader: reader)
                    return true
                },
                // One batch: the replica reaches 2 and 3 at once, so both are answered together.
                { answered && rig.stores.replica("s").version == 3 },
            ]
        }
        #expect(log == (pastTimeOut ? ["2"] : ["3", "2"]))
    }

    /// With `StoreFollower.maxBatchesInFlight` batches handed to a replica thread that has not
    /// applied them, the follower takes no more (its reader waits); once they are applied it takes
    /// more again, and a commit waiting for the last version is answered.
    @Test(.timeLimit(.minutes(1)))
    func aStoreTakesNoMoreBatchesWhileFourWaitForTheReplicaThread() {
        let gate = DispatchSemaphore(value: 0)
        let log = script { loop, note in
            let rig = Rig(loop: loop)
            let applier = SerialWorker()
            let (follower, reader) = rig.storeFollower(applier: applier)
            var answered = false
            return [
                { applier.enqueue { gate.wait() } },
                // The replica thread is held, running the closure above.
                { applier.queuedCount == 0 },
                {
                    var accepts: [Bool] = []
                    for version in 1...UInt64(StoreFollower.maxBatchesInFlight) {
                        #expect(follower.acceptsMore)
                        follower.follow([Rig.changeSetEntry(version)], reader: reader)
                        accepts.append(follower.acceptsMore)
                    }
                    note("takes more: \(accepts)")
                    note("queued: \(applier.queuedCount)")
                    follower.whenApplied(4, seconds: 10) { _ in answered = true }
                    gate.signal()
                    return true
                },
                {
                    guard answered else { return false }
                    note("applied \(rig.stores.replica("s").version), takes more: \(follower.acceptsMore)")
                    return true
                },
            ]
        }
        #expect(log == ["takes more: [true, true, true, false]", "queued: 4", "applied 4, takes more: true"])
    }

    /// A commit Redis took in one epoch waits for the replica to apply its version. If the replica
    /// moves to another epoch first (Redis came back with older data, and another node renewed
    /// the epoch and committed its own version 5), that version is not this commit: the waiter
    /// is told so, never answered committed.
    @Test(.timeLimit(.minutes(1)))
    func aCommitWhoseEpochTheReplicaLeftIsNotAnsweredCommitted() {
        let log = script { loop, note in
            let rig = Rig(loop: loop)
            let applier = SerialWorker()
            let (follower, reader) = rig.storeFollower(applier: applier)
            let store = rig.stores.replica("s")
            let old = store.epoch
            var answered = false
            return [
                {
                    follower.follow((1...4).map(Rig.changeSetEntry), reader: reader)
                    return true
                },
                { store.version == 4 },
                {
                    follower.whenApplied(5, epoch: old, seconds: 10) { applied in
                        note(applied ? "committed" : "not this commit")
                        answered = true
                    }
                    _ = applier.enqueue { store.resetReplica(models: [:], version: 4, epoch: "renewed") }
                    return true
                },
                { store.epoch == "renewed" },
                {
                    follower.follow([Rig.changeSetEntry(5)], reader: reader)
                    return true
                },
                {
                    withExtendedLifetime(rig) {}
                    return answered && store.version == 5
                },
            ]
        }
        #expect(log == ["not this commit"])
    }

    /// A replica thread whose queue is full refuses a store's batch: the store drops its cursor, to
    /// be re-read whole (its subscribers get a reset snapshot), and nothing of the batch is applied.
    @Test(.timeLimit(.minutes(1)))
    func aBatchTheFullReplicaThreadRefusesSendsTheStoreToBeReadWhole() {
        let gate = DispatchSemaphore(value: 0)
        let log = script { loop, note in
            let rig = Rig(loop: loop)
            let applier = SerialWorker(maxQueued: 1)
            let (follower, reader) = rig.storeFollower(applier: applier)
            return [
                { applier.enqueue { gate.wait() } },
                { applier.queuedCount == 0 },
                {
                    note("filler taken: \(applier.enqueue {})")
                    follower.follow([Rig.changeSetEntry(1)], reader: reader)
                    note("cursor: \(reader.cursor == nil ? "dropped" : "kept"), takes more: \(follower.acceptsMore)")
                    gate.signal()
                    return true
                },
                {
                    guard applier.queuedCount == 0 else { return false }
                    note("version: \(rig.stores.replica("s").version)")
                    return true
                },
            ]
        }
        #expect(log == ["filler taken: true", "cursor: dropped, takes more: true", "version: 0"])
    }

    /// What the followers need of a node, on one loop; its Redis connection is never started.
    private final class Rig {
        let hub: PushHub
        let stores = StoreRegistry()
        let commands: RedisConnection
        let keys = ClusterKeys(database: 0)
        let logger = Logger(label: "cluster-follower-queue")
        let loop: EventLoop
        private var appliers: [SerialWorker] = []

        init(loop: EventLoop) {
            self.loop = loop
            hub = PushHub(stores: stores, context: LoopExecutionContext(loop: loop), historyLimit: 10, counters: PushCounters())
            commands = RedisConnection(loop: loop, endpoint: RedisEndpoint(), name: "commands")
        }

        deinit {
            for applier in appliers { applier.stop() }
        }

        /// A follower of store "s" applying on `applier` (stopped with the rig), and its reader, at
        /// the log's start.
        /// A follower of store "s", whose replica this node holds (as one it made or read).
        func storeFollower(applier: SerialWorker) -> (StoreFollower, StreamReader) {
            appliers.append(applier)
            stores.replica("s")
            let follower = StoreFollower(name: "s", loop: loop, stores: stores, applier: applier, commands: commands, keys: keys, logger: logger)
            return (follower, StreamReader(key: "store-log", cursor: StreamCursor(), commands: commands, follower: follower, retry: { _ in }))
        }

        /// The store log's entry for `version`: model "m" set whole to the version.
        static func changeSetEntry(_ version: UInt64) -> StreamEntry {
            let changeSet = #"{"v":\#(version),"t":1,"c":[{"m":"m","p":[],"v":\#(version)}]}"#
            return StreamEntry(id: "\(version)-0", fields: [.init(name: "v", value: Array("\(version)".utf8)), .init(name: "c", value: Array(changeSet.utf8))])
        }
    }

    /// Runs `make`'s steps on a loop in turn, every 5 ms (so the loop's clock moves between them):
    /// a step that returns false is tried again, for at most 10 s in all. Returns what the steps
    /// noted, with "timed out" last if they did not all finish.
    private func script(_ make: @escaping @Sendable (EventLoop, @escaping (String) -> Void) -> [() -> Bool]) -> [String] {
        let log = Mutex<[String]>([])
        let thread = LoopThread { loop in
            let note: (String) -> Void = { text in log.withLock { $0.append(text) } }
            var steps = make(loop, note)[...]
            var tries = 0
            var timer: LoopTimer?
            timer = LoopTimer(loop: loop) {
                tries += 1
                if let step = steps.first, tries <= 2_000 {
                    if step() { steps.removeFirst() }
                    if !steps.isEmpty { return }
                } else if !steps.isEmpty {
                    note("timed out")
                }
                steps = []
                timer?.close()
                timer = nil
                loop.mailbox.shutDown()
            }
            timer?.start(delayMilliseconds: 5, repeatMilliseconds: 5)
        }
        #expect(thread.waitUntilStopped(seconds: 30))
        return log.withLock { $0 }
    }
}
