import ReceptionistJSON
import ReceptionistTestSupport
import Testing

@testable import ReceptionistModel

@Suite struct CoalescingBufferTests {
    /// Random commits of every kind, taken at random points: each take, applied to the state at
    /// the take before, gives the store's state, with each model's changes together.
    @Test(arguments: 1...40 as ClosedRange<UInt64>)
    func eachTakeConvergesOnTheStoreAndKeepsAModelsChangesTogether(seed: UInt64) throws {
        var source = ChangeFilterTests.OperationSource(random: SeededGenerator(state: seed))
        let store = ModelStore(name: "s")
        var copy = store.snapshot().models
        var buffer = CoalescingBuffer()
        var takes = 0
        for round in 0..<60 {
            let operations = source.commit(on: store.snapshot().models)
            if !operations.isEmpty {
                buffer.absorb(try store.commit(operations))
            }
            guard source.chance(25) || round == 59 else { continue }
            let version = buffer.version
            let changes = buffer.take()
            for change in changes { apply(change, to: &copy) }
            // Members in the store's order too: a member removed and set again went to the end.
            #expect(copy.keys.sorted() == store.snapshot().models.keys.sorted(), "seed \(seed), round \(round)")
            for (id, value) in store.snapshot().models {
                #expect(copy[id] == value, "seed \(seed), round \(round): \(id)")
            }
            var seen: [String] = []
            for change in changes where change.model != seen.last {
                #expect(!seen.contains(change.model), "seed \(seed): \(change.model)'s changes are apart")
                seen.append(change.model)
            }
            for change in changes {
                #expect((change.kind == .deleted) == (change.newValue == nil))
            }
            #expect(buffer.isEmpty && buffer.absorbed == 0)
            if !changes.isEmpty { #expect(version == store.version) }
            takes += 1
        }
        #expect(takes > 0)
    }

    /// A change's store slot is only a hint: the same random commits absorbed with the slots the
    /// store gave them and with none give the same takes, though slots are freed by deletes and
    /// given to other models, and a model put again may land in another slot.
    @Test(arguments: 1...40 as ClosedRange<UInt64>)
    func slotHintsChangeNothingButTheLookup(seed: UInt64) throws {
        var source = ChangeFilterTests.OperationSource(random: SeededGenerator(state: seed))
        let store = ModelStore(name: "s")
        var hinted = CoalescingBuffer()
        var plain = CoalescingBuffer()
        var hints = 0
        for round in 0..<80 {
            let operations = source.commit(on: store.snapshot().models)
            if !operations.isEmpty {
                let changeSet = try store.commit(operations)
                hints += changeSet.changes.filter { $0.slotHint >= 0 }.count
                hinted.absorb(changeSet)
                var unhinted = changeSet
                for index in unhinted.changes.indices { unhinted.changes[index].slotHint = -1 }
                plain.absorb(unhinted)
            }
            guard source.chance(20) || round == 79 else { continue }
            #expect(hinted.take() == plain.take(), "seed \(seed), round \(round)")
        }
        #expect(hints > 0)
    }

    /// A slot freed by a delete and given to another model within one take: the new model's
    /// changes are not folded into the old one's, and the old model, put again in another slot,
    /// keeps one set of pending changes.
    @Test func aSlotUsedAgainWithinATakeKeepsModelsApart() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "a", value: ["x": 0])])
        var buffer = CoalescingBuffer()
        let first = try store.commit([.set(model: "a", keyPath: "x", value: 1)])
        #expect(first.changes[0].slotHint == 0)
        buffer.absorb(first)
        buffer.absorb(try store.commit([.delete(model: "a")]))
        buffer.absorb(try store.commit([.put(model: "b", value: ["x": 0])]))
        let reused = try store.commit([.set(model: "b", keyPath: "x", value: 2)])
        #expect(reused.changes[0].slotHint == 0)  // a's slot, now b's
        buffer.absorb(reused)
        buffer.absorb(try store.commit([.put(model: "a", value: ["x": 3])]))
        let moved = try store.commit([.set(model: "a", keyPath: "x", value: 4)])
        #expect(moved.changes[0].slotHint == 1)
        buffer.absorb(moved)
        let changes = buffer.take()
        #expect(changes.map(\.model) == ["a", "b"])
        #expect(changes.first { $0.model == "a" }?.newValue == ["x": 4])
        #expect(changes.first { $0.model == "b" }?.newValue == ["x": 2])
    }

    /// A model deleted and made again under another Unicode form of its id within one take: the
    /// take removes it under the old spelling and makes it under the new one, so a receiver that
    /// keys models by their bytes holds no ghost of the old one.
    @Test func aModelMadeAgainUnderAnotherSpellingOfItsIdRemovesTheOldSpelling() throws {
        let (decomposed, composed) = ("e\u{301}", "\u{e9}")
        let store = ModelStore(name: "s")
        try store.commit([.put(model: decomposed, value: ["n": 1])])
        var buffer = CoalescingBuffer()
        buffer.absorb(try store.commit([.delete(model: decomposed)]))
        buffer.absorb(try store.commit([.put(model: composed, value: ["n": 2])]))
        buffer.absorb(try store.commit([.set(model: composed, keyPath: "m", value: 3)]))
        let changes = buffer.take()
        #expect(changes.map { Array($0.model.utf8) } == [Array(decomposed.utf8), Array(composed.utf8)])
        #expect(changes.map(\.kind) == [.deleted, .created])
        #expect(changes.last?.newValue == ["n": 2, "m": 3] && changes.first?.oldValue == ["n": 1])
        var copy: [String: JSONValue] = [decomposed: ["n": 1]]
        for change in changes { apply(change, to: &copy) }
        #expect(copy.keys.map { Array($0.utf8) } == [Array(composed.utf8)])
    }

    /// A member removed and set again within one take: the store put it back at the end of its
    /// object, and so does a receiver of the take. Toggled again and again, it keeps two entries.
    @Test func aMemberRemovedAndSetAgainGoesToTheEndAsInTheStore() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["a": 1, "b": 2, "c": ["x": 1, "y": 2]])])
        var copy = store.snapshot().models
        var buffer = CoalescingBuffer()
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "a", value: nil)]))
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "d", value: 4)]))
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "a", value: 5)]))
        // Removed, then made again beneath: `c` goes to the end too.
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "c", value: nil)]))
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "c.y", value: 3)]))
        let changes = buffer.take()
        #expect(changes == [
            ModelChange(model: "m", keyPath: "d", oldValue: nil, newValue: 4),
            ModelChange(model: "m", keyPath: "a", oldValue: 1, newValue: nil),
            ModelChange(model: "m", keyPath: "a", oldValue: nil, newValue: 5),
            ModelChange(model: "m", keyPath: "c", oldValue: ["x": 1, "y": 2], newValue: nil),
            ModelChange(model: "m", keyPath: "c", oldValue: nil, newValue: ["y": 3]),
        ])
        for change in changes { apply(change, to: &copy) }
        #expect(copy == store.snapshot().models)
        #expect(copy["m"]?.objectValue?.keys.map { $0 } == ["b", "d", "a", "c"])

        for round in 0..<100 {
            buffer.absorb(try store.commit([.set(model: "m", keyPath: "b", value: nil)]))
            buffer.absorb(try store.commit([.set(model: "m", keyPath: "b", value: .number(JSONNumber(round)))]))
            if round % 10 == 0 { buffer.absorb(try store.commit([.set(model: "m", keyPath: ModelKeyPath(["e\(round)"]), value: true)])) }
        }
        let toggled = buffer.take()
        #expect(toggled.filter { $0.keyPath == "b" }.count == 2)
        for change in toggled { apply(change, to: &copy) }
        #expect(copy == store.snapshot().models)

        // A change above a moved path puts the path's first old value back into its own.
        let before = copy["m"]
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "a", value: nil)]))
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "d", value: nil)]))
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "a", value: 6)]))
        buffer.absorb(try store.commit([.set(model: "m", keyPath: .whole, value: ["z": 1])]))
        let replaced = buffer.take()
        #expect(replaced.map(\.keyPath) == [.whole] && replaced.first?.newValue == ["z": 1])
        // Exact but for its members' order: a removed member put back goes last.
        #expect(replaced.first?.oldValue.map(ChangeFilterTests.unordered) == before.map(ChangeFilterTests.unordered))
    }

    /// Models made and deleted between two takes leave nothing, and what the buffer holds stays
    /// bounded by what it tells: a subscriber stalled while 20,000 models came and went was owed
    /// 20,000 removals, and the buffer grew with each.
    @Test func modelsThatComeAndGoBetweenTakesLeaveNothingAndTheBufferStaysBounded() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "kept", value: ["n": 0]), .put(model: "gone", value: ["n": 0])])
        var copy = store.snapshot().models
        var buffer = CoalescingBuffer()
        buffer.absorb(try store.commit([.delete(model: "gone")]))
        var most = 0
        for n in 1...20_000 {
            var operations: [StoreOperation] = [.put(model: "m\(n)", value: ["n": .number(JSONNumber(n))])]
            if n > 1 { operations.append(.delete(model: "m\(n - 1)")) }
            if n % 97 == 0 { operations.append(.set(model: "kept", keyPath: "n", value: .number(JSONNumber(n)))) }
            buffer.absorb(try store.commit(operations))
            most = max(most, buffer.heldEntries)
        }
        #expect(most <= 2 * CoalescingBuffer.compactionFloor + 8, "held \(most) entries")
        let changes = buffer.take()
        #expect(changes.map(\.model).sorted() == ["gone", "kept", "m20000"])
        for change in changes { apply(change, to: &copy) }
        #expect(copy == store.snapshot().models)
    }

    /// Members set and removed again between two takes (`cursors.<session>`) leave nothing, as
    /// models that come and go do: the buffer stays bounded, and each change does not walk every
    /// key ever used. One entry per key stayed before, 10,000 of them.
    @Test func membersThatComeAndGoBetweenTakesLeaveNothingAndTheBufferStaysBounded() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["kept": 0, "gone": 0])])
        var copy = store.snapshot().models
        var buffer = CoalescingBuffer()
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "gone", value: nil)]))
        var most = 0
        for n in 1...10_000 {
            buffer.absorb(try store.commit([.set(model: "m", keyPath: ModelKeyPath(["k\(n)"]), value: .number(JSONNumber(n)))]))
            var operations: [StoreOperation] = [.set(model: "m", keyPath: ModelKeyPath(["k\(n)"]), value: nil)]
            if n % 97 == 0 { operations.append(.set(model: "m", keyPath: "kept", value: .number(JSONNumber(n)))) }
            buffer.absorb(try store.commit(operations))
            most = max(most, buffer.heldEntries)
        }
        #expect(most <= 2 * CoalescingBuffer.compactionFloor + 8, "held \(most) entries")
        let changes = buffer.take()
        let paths = changes.map(\.keyPath.description).sorted()
        #expect(paths.count == 2)
        #expect(paths.prefix(3) == ["gone", "kept"])
        for change in changes { apply(change, to: &copy) }
        #expect(copy == store.snapshot().models)
    }

    /// Random commits with models coming and going, absorbed long enough between takes that the
    /// buffer compacts: each take still converges on the store.
    @Test(arguments: 1...8 as ClosedRange<UInt64>)
    func aCompactedBufferStillConverges(seed: UInt64) throws {
        var source = ChangeFilterTests.OperationSource(random: SeededGenerator(state: seed))
        let store = ModelStore(name: "s")
        var copy = store.snapshot().models
        var buffer = CoalescingBuffer()
        var compacted = false
        for round in 0..<9000 {
            let operations = source.commit(on: store.snapshot().models)
            if !operations.isEmpty { buffer.absorb(try store.commit(operations)) }
            var churn: [StoreOperation] = [.put(model: "churn\(round)", value: [:])]
            if store.model("churn\(round - 1)") != nil { churn.append(.delete(model: "churn\(round - 1)")) }
            let held = buffer.heldEntries
            buffer.absorb(try store.commit(churn))
            compacted = compacted || buffer.heldEntries < held
            guard round % 4500 == 4499 else { continue }
            for change in buffer.take() { apply(change, to: &copy) }
            #expect(copy.keys.sorted() == store.snapshot().models.keys.sorted(), "seed \(seed), round \(round)")
            for (id, value) in store.snapshot().models {
                #expect(copy[id] == value, "seed \(seed), round \(round): \(id)")
            }
        }
        #expect(compacted, "the buffer never compacted")
    }

    @Test func aChangeAboveReplacesThoseBeneathAndGoesAfterTheModelsOthers() throws {
        let store = ModelStore(name: "s")
        try store.commit([
            .put(model: "m", value: ["style": ["width": 1, "color": "red"], "label": "a"]),
            .put(model: "n", value: [:]),
        ])
        var buffer = CoalescingBuffer()
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "style.width", value: 2)]))
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "label", value: "b")]))
        buffer.absorb(try store.commit([.set(model: "n", keyPath: .whole, value: ["x": 1])]))
        buffer.absorb(try store.commit([.set(model: "m", keyPath: "style", value: ["width": 3])]))
        #expect(buffer.take() == [
            ModelChange(model: "m", keyPath: "label", oldValue: "a", newValue: "b"),
            // The replaced change's first old value is put back into the one that replaced it.
            ModelChange(model: "m", keyPath: "style", oldValue: ["width": 1, "color": "red"], newValue: ["width": 3]),
            ModelChange(model: "n", keyPath: .whole, oldValue: [:], newValue: ["x": 1]),
        ])
    }

    @Test func theSamePathAgainKeepsItsFirstOldValueAndItsPlace() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "a", value: ["color": "red"]), .put(model: "b", value: ["color": "red"])])
        var buffer = CoalescingBuffer()
        for color in ["green", "blue", "black"] {
            buffer.absorb(try store.commit([
                .set(model: "b", keyPath: "color", value: .string(color)),
                .set(model: "a", keyPath: "color", value: .string(color)),
            ]))
        }
        #expect(buffer.absorbed == 6)
        #expect(buffer.take() == [
            ModelChange(model: "b", keyPath: "color", oldValue: "red", newValue: "black"),
            ModelChange(model: "a", keyPath: "color", oldValue: "red", newValue: "black"),
        ])
        // Empty again, and the next take starts afresh.
        #expect(buffer.take() == [])
        buffer.absorb(try store.commit([.set(model: "a", keyPath: "color", value: "white")]))
        #expect(buffer.take() == [ModelChange(model: "a", keyPath: "color", oldValue: "black", newValue: "white")])
    }
}
