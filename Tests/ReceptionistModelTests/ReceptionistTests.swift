import Dispatch
import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync
import ReceptionistTestSupport
import Testing

@Suite struct ReceptionistTests {
    /// Loop-side record of what a receptionist delivered.
    /// Why `@unchecked Sendable` is safe: only the target queue touches it until the test reads it
    /// after `queue.sync`, which orders the accesses.
    final class Applied: @unchecked Sendable {
        var models: [String: JSONValue] = [:]
        var versions: [UInt64] = []
        var version: UInt64 = 0
        var deliveries = 0
        var outOfOrder = 0
    }

    @Test(.timeLimit(.minutes(10)))
    func eachSeesEverythingInOrderAndCoalesceConverges() throws {
        let threads = 8
        let perThread = Int(100_000 * stressScale)
        let store = ModelStore(name: "s")
        try store.commit((0..<64).map { .put(model: "m\($0)", value: ["color": 0]) })
        let initial = store.snapshot()

        let eachContext = QueueContext(), coalesceContext = QueueContext(), batchContext = QueueContext()
        let each = Applied(), coalesced = Applied(), batched = Applied()
        each.version = initial.version
        coalesced.models = initial.models
        batched.models = initial.models
        let eachReceptionist = Receptionist(store: store, policy: .each, target: eachContext, maxPendingChangeSets: 4096) { delivery in
            each.deliveries += 1
            for changeSet in delivery.changeSets {
                if changeSet.version != each.version + 1 { each.outOfOrder += 1 }
                each.version = changeSet.version
            }
        }
        let coalesceReceptionist = Receptionist(store: store, policy: .coalesce, target: coalesceContext) { delivery in
            coalesced.deliveries += 1
            for change in delivery.changes { apply(change, to: &coalesced.models) }
            coalesced.version = delivery.version
        }
        let batchReceptionist = Receptionist(store: store, policy: .batch(intervalSeconds: 0.01), target: batchContext) { delivery in
            batched.deliveries += 1
            for change in delivery.changes { apply(change, to: &batched.models) }
            batched.version = delivery.version
        }

        let group = DispatchGroup()
        for t in 0..<threads {
            DispatchQueue.global().async(group: group) {
                for i in 0..<perThread {
                    let a = "m\((t * 13 + i) % 64)", b = "m\((t * 5 + i * 3) % 64)"
                    // Mix single changes, pairs, nested paths and whole-model replacements.
                    switch i % 7 {
                    case 0: try! store.commit([.put(model: a, value: ["color": .number(JSONNumber(Double(i))), "n": ["x": 1]])])
                    case 1: try! store.commit([.set(model: a, keyPath: "n.y", value: .number(JSONNumber(Double(t))))])
                    case 2: try! store.commit([.set(model: a, keyPath: "color", value: .number(JSONNumber(Double(i)))),
                                               .set(model: b, keyPath: "color", value: .number(JSONNumber(Double(-i))))])
                    default: try! store.commit([.set(model: a, keyPath: "color", value: .number(JSONNumber(Double(t * perThread + i))))])
                    }
                }
            }
        }
        #expect(group.wait(timeout: .now() + 150) == .success)
        let final = store.snapshot()
        #expect(final.version == UInt64(1 + threads * perThread))

        #expect(eventually { eachContext.queue.sync { each.version } == final.version })
        #expect(eventually { coalesceContext.queue.sync { coalesced.version } == final.version })
        #expect(eventually { batchContext.queue.sync { batched.version } == final.version })
        eachContext.queue.sync {
            #expect(each.outOfOrder == 0)
        }
        coalesceContext.queue.sync {
            #expect(coalesced.models == final.models)
        }
        batchContext.queue.sync {
            #expect(batched.models == final.models)
        }
        // The target is woken at most once per delivery: never for work already pending.
        let stats = coalesceReceptionist.statistics
        #expect(stats.wakeups == stats.deliveries || stats.wakeups == stats.deliveries + 1)
        #expect(stats.deliveries < stats.observed)
        #expect(eachReceptionist.statistics.wakeups <= eachReceptionist.statistics.deliveries + 1)
        // A batch is one wake-up (or one timer) per delivery, however many change sets it holds.
        let batchStats = batchReceptionist.statistics
        #expect(batchStats.wakeups == batchStats.deliveries || batchStats.wakeups == batchStats.deliveries + 1)
        #expect(batchStats.deliveries < batchStats.observed)
        eachReceptionist.cancel()
        coalesceReceptionist.cancel()
        batchReceptionist.cancel()
    }

    @Test(.timeLimit(.minutes(10)))
    func atomicChangeSetsAreNeverDeliveredInHalves() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "a", value: ["v": 0]), .put(model: "b", value: ["v": 0])])
        let context = QueueContext()
        let halves = PThreadLock(0)
        let receptionist = Receptionist(store: store, policy: .each, target: context) { delivery in
            for changeSet in delivery.changeSets where Set(changeSet.changes.map(\.model)) != ["a", "b"] {
                halves.withLock { $0 += 1 }
            }
        }
        let group = DispatchGroup()
        for t in 0..<4 {
            DispatchQueue.global().async(group: group) {
                for i in 0..<Int(5_000 * stressScale) {
                    let value = JSONValue.number(JSONNumber(Double(t * 100_000 + i)))
                    try! store.commit([.set(model: "a", keyPath: "v", value: value), .set(model: "b", keyPath: "v", value: value)])
                }
            }
        }
        #expect(group.wait(timeout: .now() + 50) == .success)
        #expect(eventually { receptionist.statistics.observed == Int(store.version) - 1 })
        context.queue.sync {}
        #expect(halves.withLock { $0 } == 0)
        receptionist.cancel()
    }

    @Test func coalescingKeepsTheLatestValuePerPath() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["color": "a"])])
        let context = QueueContext()
        let gate = DispatchSemaphore(value: 0)
        context.queue.async { gate.wait() }  // hold the target so the changes pile up
        let deliveries = PThreadLock<[Receptionist.Delivery]>([])
        let receptionist = Receptionist(store: store, policy: .coalesce, target: context) { delivery in
            deliveries.withLock { $0.append(delivery) }
        }
        try store.commit([.set(model: "m", keyPath: "color", value: "b")])
        try store.commit([.set(model: "m", keyPath: "color", value: "c")])
        try store.commit([.set(model: "m", keyPath: "style.width", value: 1)])
        try store.commit([.put(model: "m", value: ["color": "d"])])
        try store.commit([.set(model: "m", keyPath: "style.width", value: 2)])
        #expect(context.wakeups.withLock { $0 } == 1)
        gate.signal()
        context.queue.sync {}
        let delivered = deliveries.withLock { $0 }
        #expect(delivered.count == 1)
        #expect(delivered.first?.version == 6)
        #expect(delivered.first?.changeSetCount == 5)
        #expect(delivered.first?.changes == [
            // The whole-model replacement absorbed the changes beneath it, and the later width was
            // folded in; its old value is the model before the first of them.
            ModelChange(model: "m", keyPath: .whole, oldValue: ["color": "a"],
                        newValue: ["color": "d", "style": ["width": 2]]),
        ])
        receptionist.cancel()
    }

    /// Cancelling must not wait on a committing thread that waits for the target: a job held by
    /// `each`'s backpressure while the target (the loop) cancels the receptionist.
    @Test(.timeLimit(.minutes(10)))
    func cancellingWhileTheCommitterWaitsForTheTargetDoesNotDeadlock() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["n": 0])])
        let context = QueueContext()
        let gate = DispatchSemaphore(value: 0)
        context.queue.async { gate.wait() }  // the target does not drain
        let receptionist = Receptionist(store: store, policy: .each, target: context, maxPendingChangeSets: 1) { _ in }
        let committed = PThreadLock(0)
        let committer = WorkerThread.start {
            for n in 1...3 {
                _ = try? store.commit([.set(model: "m", keyPath: "n", value: .number(JSONNumber(n)))])
                committed.withLock { $0 += 1 }
            }
        }
        // The second commit waits for the target; then the target's side cancels.
        #expect(eventually { committed.withLock { $0 } == 1 && store.version == 3 })
        receptionist.cancel()
        committer.join()
        #expect(committed.withLock { $0 } == 3, "the waiting commit went on once cancelled")
        gate.signal()
        context.queue.sync {}
    }
}
