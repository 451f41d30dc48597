import ReceptionistJSON
import ReceptionistTestSupport
import Testing

@testable import ReceptionistModel

@Suite struct ModelSlotsTests {
    /// Random puts, removals and in-place edits, checked against a `Dictionary` after each step:
    /// the same models under the same ids, whichever slots were freed and used again.
    @Test func holdsWhatADictionaryHoldsThroughPutsRemovalsAndEdits() {
        var generator = SeededGenerator(state: 7)
        let pool = (0..<40).map { $0 % 5 == 0 ? "mod\u{E8}le-\($0)" : "m\($0)" }
        var slots = ModelSlots()
        var reference: [String: JSONValue] = [:]
        for step in 0..<5_000 {
            let id = pool[Int(generator.next() % UInt64(pool.count))]
            let value: JSONValue = ["n": .number(JSONNumber(step))]
            switch generator.next() % 4 {
            case 0:
                #expect(slots.removeValue(forKey: id) == reference.removeValue(forKey: id))
            case 1:
                slots.modify(id) { $0.setValue(.number(JSONNumber(step)), at: ["edited"]) }
                reference[id]?.setValue(.number(JSONNumber(step)), at: ["edited"])
            default:
                #expect(slots.updateValue(value, forKey: id) == reference.updateValue(value, forKey: id))
            }
            #expect(slots.count == reference.count)
            #expect(slots[id] == reference[id])
            if let slot = slots.slot(of: id) { #expect(slots.values[slot] == reference[id]) }
        }
        #expect(slots.dictionary == reference)
        #expect(Set(slots.modelIDs) == Set(reference.keys) && slots.modelIDs.count == reference.count)
        #expect(ModelSlots(reference).dictionary == reference)
    }

    /// A removed model's slot goes to the next new model, so the arrays do not grow with churn.
    @Test func aFreedSlotIsUsedAgain() {
        var slots = ModelSlots()
        slots.updateValue(["a": 1], forKey: "a")
        slots.updateValue(["b": 2], forKey: "b")
        let freed = slots.slot(of: "a")
        slots.removeValue(forKey: "a")
        #expect(slots.slot(of: "a") == nil && slots["a"] == nil)
        slots.updateValue(["c": 3], forKey: "c")
        #expect(slots.slot(of: "c") == freed && slots.values.count == 2)
        #expect(slots.dictionary == ["b": ["b": 2], "c": ["c": 3]])
    }

    /// Ids written two ways that Swift takes as one ("é" as one scalar, or "e" and a combining
    /// accent) name one model, which keeps the id it was made with: every change a commit reports
    /// names it so, whichever way the operation wrote it, as the snapshot does. (The change named
    /// the operation's bytes, and a client that keeps models by their bytes made a second one.)
    @Test func anIdWrittenAnotherWayNamesTheModelAsItWasMade() throws {
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(Array(composed.utf8) != Array(decomposed.utf8))
        let store = ModelStore(name: "s")
        try store.commit([.put(model: composed, value: ["n": 1])])
        let changeSets = try [
            store.commit([.put(model: decomposed, value: ["n": 2])]),
            store.commit([.set(model: decomposed, keyPath: "n", value: 3)]),
            store.commit([.patch(model: decomposed, patch: ["n": 4]), .put(model: "b", value: [:])]),
            store.commit([.delete(model: decomposed)]),
        ]
        for changeSet in changeSets {
            let named = changeSet.changes.filter { $0.model != "b" }.map { Array($0.model.utf8) }
            #expect(named == [Array(composed.utf8)], "version \(changeSet.version)")
        }
        try store.commit([.put(model: decomposed, value: ["n": 5])])
        #expect(store.snapshot().models.keys.map { Array($0.utf8) }.sorted { $0.count < $1.count } == [Array("b".utf8), Array(decomposed.utf8)])
    }
}
