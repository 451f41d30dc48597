import Dispatch
import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync
import ReceptionistTestSupport
import Testing

/// A receptionist's cadence on a manual clock: batches, their wake-ups and folding, and filters.
extension ReceptionistTests {
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
