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

    // MARK: Cadence, on a manual clock

    /// Collects deliveries on the target (the test's thread, in `drain`).
    final class DeliveryLog: Sendable {
        private let items = PThreadLock<[Receptionist.Delivery]>([])
        func append(_ delivery: Receptionist.Delivery) { items.withLock { $0.append(delivery) } }
        var all: [Receptionist.Delivery] { items.withLock { $0 } }
        var count: Int { items.withLock { $0.count } }
        var last: Receptionist.Delivery? { items.withLock { $0.last } }
    }

    private func setColor(_ store: ModelStore, _ model: String, _ color: JSONValue) throws {
        try store.commit([.set(model: model, keyPath: "color", value: color)])
    }

    @Test func aBatchDeliversTheFirstChangeAfterAQuietSpellAtOnce() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["color": "a"])])
        let context = ManualContext(), log = DeliveryLog()
        let receptionist = Receptionist(store: store, policy: .batch(intervalSeconds: 0.25), target: context) { log.append($0) }
        try setColor(store, "m", "b")
        #expect(context.enqueued == 1 && context.delayed == 0, "queued at once, not on a timer")
        #expect(context.pending == 1)
        #expect(context.drain() == 1)
        #expect(log.count == 1 && log.last?.version == 2)
        #expect(log.last?.changes == [ModelChange(model: "m", keyPath: "color", oldValue: "a", newValue: "b")])

        // A quiet spell longer than the interval: the next change goes at once again.
        context.advance(by: 0.5)
        try setColor(store, "m", "c")
        #expect(context.enqueued == 2 && context.delayed == 0)
        context.drain()
        #expect(log.count == 2 && log.last?.version == 3)
        // Exactly one interval after the last delivery is not too soon.
        context.advance(by: 0.25)
        try setColor(store, "m", "d")
        #expect(context.enqueued == 3 && context.delayed == 0)
        context.drain()
        #expect(log.count == 3 && log.last?.version == 4)
        receptionist.cancel()
    }

    @Test func changesWithinTheIntervalWaitForOneDelayedDelivery() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["color": "a"])])
        let context = ManualContext(), log = DeliveryLog()
        let receptionist = Receptionist(store: store, policy: .batch(intervalSeconds: 0.25), target: context) { log.append($0) }
        try setColor(store, "m", "b")
        context.drain()  // delivered at 1000
        #expect(log.count == 1)

        context.advance(by: 0.125)
        try setColor(store, "m", "c")
        #expect(context.enqueued == 1 && context.delayed == 1, "too soon after the last delivery: a timer")
        #expect(context.requestedDelays == [0.125], "what is left of the interval")
        #expect(context.dueTimes == [1000.25], "due at the last delivery plus the interval")
        #expect(context.pending == 0)
        try setColor(store, "m", "d")
        try store.commit([.set(model: "m", keyPath: "size", value: 3)])
        #expect(context.wakeups == 2, "changes joining pending work wake nothing")
        #expect(context.drain() == 0 && log.count == 1)

        context.advance(by: 0.0625)
        #expect(context.drain() == 0 && log.count == 1, "not due yet")
        context.advance(by: 0.0625)
        #expect(context.waiting == 0 && context.pending == 1)
        #expect(context.drain() == 1)
        #expect(log.count == 2)
        let batch = try #require(log.last)
        #expect(batch.version == 5 && batch.changeSetCount == 3)
        #expect(batch.changes == [
            ModelChange(model: "m", keyPath: "color", oldValue: "b", newValue: "d"),
            ModelChange(model: "m", keyPath: "size", oldValue: nil, newValue: 3),
        ])
        #expect(!batch.containsReset)

        // Right after a delivery, a change waits the whole interval.
        try setColor(store, "m", "e")
        #expect(context.requestedDelays == [0.125, 0.25])
        #expect(context.dueTimes == [1000.5])
        context.advance(by: 0.25)
        context.drain()
        #expect(log.count == 3 && log.last?.version == 6)
        let statistics = receptionist.statistics
        #expect(statistics.observed == 5 && statistics.deliveries == 3 && statistics.wakeups == 3)
    }

    @Test func aBatchWakesTheTargetAtMostOncePerDelivery() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["n": 0])])
        let context = ManualContext(), log = DeliveryLog()
        let receptionist = Receptionist(store: store, policy: .batch(intervalSeconds: 0.5), target: context) { log.append($0) }
        var committed = 0
        for round in 1...6 {
            for _ in 0..<round {
                committed += 1
                try store.commit([.set(model: "m", keyPath: "n", value: .number(JSONNumber(committed)))])
            }
            // Half the rounds arrive after a quiet spell, half within the interval.
            context.advance(by: round.isMultiple(of: 2) ? 1.0 : 0.5)
            context.drain()
            #expect(log.count == round, "round \(round)")
            #expect(log.last?.changeSetCount == round)
            #expect(log.last?.changes == [ModelChange(model: "m", keyPath: "n", oldValue: .number(JSONNumber(committed - round)),
                                                      newValue: .number(JSONNumber(committed)))])
        }
        let statistics = receptionist.statistics
        #expect(statistics.observed == committed)
        #expect(statistics.deliveries == 6 && statistics.wakeups == 6)
        #expect(context.wakeups == 6)
        #expect(context.drain() == 0 && context.waiting == 0)
    }

    @Test func aBatchFoldsChangesAndKeepsTheOldValueBeforeTheFirst() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["color": "a", "style": ["width": 1]])])
        let context = ManualContext(), log = DeliveryLog()
        let receptionist = Receptionist(store: store, policy: .batch(intervalSeconds: 0.25), target: context) { log.append($0) }
        try store.commit([.set(model: "m", keyPath: "size", value: 1)])
        context.drain()  // the first change goes at once; the next ones are batched

        try setColor(store, "m", "b")
        try setColor(store, "m", "c")
        try setColor(store, "m", "d")
        try store.commit([.set(model: "m", keyPath: "style", value: ["width": 2])])
        try store.commit([.set(model: "m", keyPath: "style.width", value: 3)])
        try store.commit([.put(model: "n", value: ["color": "x"])])
        try store.commit([.set(model: "n", keyPath: "color", value: "y")])
        try store.commit([.set(model: "m", keyPath: "label", value: "p")])
        try store.commit([.set(model: "m", keyPath: "label", value: "q")])
        context.advance(by: 0.25)
        context.drain()
        let batch = try #require(log.last)
        #expect(log.count == 2 && batch.version == 11 && batch.changeSetCount == 9)
        #expect(batch.changes == [
            ModelChange(model: "m", keyPath: "color", oldValue: "a", newValue: "d"),
            // A change beneath a pending one is folded into it, which keeps its old value.
            ModelChange(model: "m", keyPath: "style", oldValue: ["width": 1], newValue: ["width": 3]),
            // A path created in the batch is still created: it had no value before the first change.
            ModelChange(model: "m", keyPath: "label", oldValue: nil, newValue: "q"),
            // A model created in the batch is still created.
            ModelChange(model: "n", keyPath: .whole, oldValue: nil, newValue: ["color": "y"]),
        ])
        #expect(batch.changes.map(\.kind) == [.updated, .updated, .created, .created])
        receptionist.cancel()
    }

    @Test func aBatchCarriesTheCommitTimesOfItsFirstAndLastChangeSet() {
        let store = ModelStore(name: "s")
        let context = ManualContext(), log = DeliveryLog()
        let receptionist = Receptionist(store: store, policy: .batch(intervalSeconds: 1), target: context) { log.append($0) }
        #expect(store.applyReplicated(version: 1, committedAt: 100, changes: [ReplicatedChange(model: "m", keyPath: .whole, value: ["n": 1])]))
        context.drain()
        for version: UInt64 in 2...4 {
            let change = ReplicatedChange(model: "m", keyPath: "n", value: .number(JSONNumber(version)))
            #expect(store.applyReplicated(version: version, committedAt: version * 100, changes: [change]))
        }
        context.advance(by: 1)
        context.drain()
        #expect(log.all.map(\.firstCommittedAtMicroseconds) == [100, 200])
        #expect(log.all.map(\.committedAtMicroseconds) == [100, 400])
        #expect(log.all.map(\.version) == [1, 4])
        receptionist.cancel()
    }

    @Test func aCancelledBatchDeliversNothingMore() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["color": "a"])])
        let context = ManualContext(), log = DeliveryLog()
        let receptionist = Receptionist(store: store, policy: .batch(intervalSeconds: 0.25), target: context) { log.append($0) }
        try setColor(store, "m", "b")
        context.drain()
        try setColor(store, "m", "c")
        #expect(context.waiting == 1)
        receptionist.cancel()
        context.advance(by: 1)
        #expect(context.drain() == 1, "the timer fires")
        #expect(log.count == 1, "but brings nothing")
        try setColor(store, "m", "d")
        #expect(context.wakeups == 2 && store.observerCount == 0)
    }

    @Test func aFilterNarrowsWhatTheReceptionistSees() throws {
        let store = ModelStore(name: "s")
        let context = ManualContext(), log = DeliveryLog()
        let filter = ChangeFilter(models: ["a*"], paths: ["color"])
        let receptionist = Receptionist(store: store, filter: filter, policy: .each, target: context) { log.append($0) }
        try store.commit([.put(model: "b", value: ["color": "red"])])
        try store.commit([.put(model: "a1", value: ["color": "red", "size": 1])])
        try store.commit([.set(model: "a1", keyPath: "size", value: 2)])
        try store.commit([.set(model: "a1", keyPath: "color", value: "blue"), .set(model: "b", keyPath: "color", value: "blue")])
        #expect(receptionist.statistics.observed == 2, "change sets the filter leaves empty are not observed")
        #expect(context.wakeups == 1)
        context.drain()
        let sets = log.all.flatMap(\.changeSets)
        #expect(sets.map(\.version) == [2, 4])
        #expect(sets.map(\.changes) == [
            [ModelChange(model: "a1", keyPath: .whole, oldValue: nil, newValue: ["color": "red"])],
            [ModelChange(model: "a1", keyPath: "color", oldValue: "red", newValue: "blue")],
        ])
        receptionist.cancel()

        // Coalesced too: the filter applies before the buffer.
        let batchLog = DeliveryLog()
        let batch = Receptionist(store: store, filter: filter, policy: .batch(intervalSeconds: 0.25), target: context) { batchLog.append($0) }
        try store.commit([.set(model: "b", keyPath: "color", value: "green")])
        #expect(context.pending == 0 && context.waiting == 0)
        try store.commit([.put(model: "a1", value: ["color": "green", "size": 9])])
        try store.commit([.set(model: "a1", keyPath: "color", value: "grey"), .put(model: "a2", value: ["size": 1])])
        context.advance(by: 0.25)
        context.drain()
        #expect(batchLog.count == 1)
        #expect(batchLog.last?.version == 7)
        #expect(batchLog.last?.changes == [
            ModelChange(model: "a1", keyPath: "color", oldValue: "blue", newValue: "grey"),
            ModelChange(model: "a2", keyPath: .whole, oldValue: nil, newValue: [:]),
        ])
        batch.cancel()
    }

    @Test(arguments: [Receptionist.Policy.coalesce, .batch(intervalSeconds: 0.25)])
    func aReplicaResetIsFlaggedInTheDelivery(policy: Receptionist.Policy) {
        let store = ModelStore(name: "s")
        #expect(store.applyReplicated(version: 1, committedAt: 0, changes: [ReplicatedChange(model: "m", keyPath: .whole, value: ["n": 1])]))
        let context = ManualContext(), log = DeliveryLog(), narrowLog = DeliveryLog()
        let receptionist = Receptionist(store: store, policy: policy, target: context) { log.append($0) }
        // A filter that keeps nothing of the reset still hears of it.
        let narrow = Receptionist(store: store, filter: ChangeFilter(models: ["z"], paths: nil), policy: policy, target: context) {
            narrowLog.append($0)
        }
        #expect(store.applyReplicated(version: 2, committedAt: 0, changes: [ReplicatedChange(model: "m", keyPath: "n", value: 2)]))
        context.advance(by: 1)
        context.drain()
        #expect(log.count == 1 && log.last?.containsReset == false)

        store.resetReplica(models: ["x": ["n": 9]], version: 10)
        context.advance(by: 1)
        context.drain()
        #expect(log.count == 2)
        #expect(log.last?.containsReset == true && log.last?.version == 10)
        #expect(Set(log.last?.changes.map(\.model) ?? []) == ["m", "x"])
        #expect(narrowLog.count == 1)
        #expect(narrowLog.last?.containsReset == true && narrowLog.last?.version == 10 && narrowLog.last?.changes == [])

        #expect(store.applyReplicated(version: 11, committedAt: 0, changes: [ReplicatedChange(model: "x", keyPath: "n", value: 10)]))
        context.advance(by: 1)
        context.drain()
        #expect(log.count == 3 && log.last?.containsReset == false, "a reset is flagged in its own delivery only")
        receptionist.cancel()
        narrow.cancel()
    }
}
