import ReceptionistTestSupport
import Testing

@testable import ReceptionistModel

@Suite struct ModelTableTests {
    @Test func findsWhatWasSetAndNothingElseThroughGrowthAndClearing() {
        var table = ModelTable()
        #expect(table.isEmpty && table.value(for: "a") == nil)
        // Past several doublings, with ids of every length class: small, and longer than a
        // small string holds, and sharing prefixes.
        let ids = (0..<5_000).map { $0 % 3 == 0 ? "m\($0)" : "a-long-model-identifier-\($0)-of-some-length" }
        for (index, id) in ids.enumerated() { table.set(Int32(index), for: id) }
        #expect(table.count == ids.count)
        for (index, id) in ids.enumerated() { #expect(table.value(for: id) == Int32(index)) }
        #expect(table.value(for: "m1") == nil)  // 1 % 3 != 0: never set
        #expect(table.value(for: "") == nil)

        // Setting again replaces, and adds nothing.
        table.set(-7, for: ids[42])
        #expect(table.value(for: ids[42]) == -7 && table.count == ids.count)

        table.removeAll()
        #expect(table.isEmpty)
        for id in ids.prefix(100) { #expect(table.value(for: id) == nil) }
        // Used again after clearing (its cells shrunk, since the last use needed far fewer).
        table.set(1, for: "x")
        table.set(2, for: "y")
        #expect(table.value(for: "x") == 1 && table.value(for: "y") == 2 && table.value(for: ids[0]) == nil)
        table.removeAll()
        #expect(table.value(for: "x") == nil)
    }

    @Test func theHashDependsOnEveryByte() {
        #expect(ModelTable().hashValue(of: "tile-1") != ModelTable().hashValue(of: "tile-2"))
        #expect(ModelTable().hashValue(of: "ab") != ModelTable().hashValue(of: "ba"))
        // A native string and one made from a substring hash alike.
        let whole = "prefix-model-7"
        #expect(ModelTable().hashValue(of: String(whole.dropFirst(7))) == ModelTable().hashValue(of: "model-7"))
        #expect(ModelTable().hashValue(of: "café") == nil)
    }

    /// Every length, through the loads that overlap (under 4 bytes, 4 to 7, and past each word):
    /// ids that differ in any one byte, or only in length, hash apart, and a byte that is not
    /// ASCII anywhere makes the id go to `others`.
    @Test func everyByteOfEveryLengthCounts() {
        let table = ModelTable()
        var seen: [UInt64: String] = [:]
        for length in 0...40 {
            let id = String((0..<length).map { Character(Unicode.Scalar(UInt8(97 + $0 % 26))) })
            for candidate in [id, id + "a"] + (0..<length).map({ position -> String in
                var bytes = Array(id.utf8)
                bytes[position] = bytes[position] == 90 ? 89 : 90
                return String(decoding: bytes, as: UTF8.self)
            }) {
                let hash = table.hashValue(of: candidate)
                #expect(hash != nil)
                if let hash, let other = seen[hash] { #expect(other == candidate, "\(other) and \(candidate) collide") }
                if let hash { seen[hash] = candidate }
            }
            for position in 0..<length {
                var bytes = Array(id.utf8)
                bytes[position] = 0xC3
                bytes.insert(0xA9, at: position + 1)
                #expect(table.hashValue(of: String(decoding: bytes, as: UTF8.self)) == nil)
            }
        }
    }

    /// Ids equal as Swift compares them (and as the store keys its models) are one entry, even
    /// when their bytes differ: an accented letter as one scalar or as a letter and a combining
    /// accent.
    @Test func idsEqualAsStringsAreOneEntry() {
        var table = ModelTable()
        table.set(1, for: "caf\u{E9}")
        #expect(table.value(for: "cafe\u{301}") == 1)
        table.set(2, for: "cafe\u{301}")
        #expect(table.count == 1 && table.value(for: "caf\u{E9}") == 2)
        #expect(table.value(for: "cafe") == nil)
        table.set(3, for: "cafe")
        #expect(table.count == 2)
        table.removeAll()
        #expect(table.isEmpty && table.value(for: "caf\u{E9}") == nil)
    }

    /// Three scalars are canonically ASCII (the Kelvin sign is `K`): an id that holds them beside
    /// ASCII only is the ASCII id it equals, found, set and removed there. They were two entries,
    /// so a store held two models that every snapshot, keyed as Swift compares, showed as one.
    @Test func anIdCanonicallyEqualToAnASCIIIdIsThatEntry() {
        var table = ModelTable()
        table.set(1, for: "tileK")
        #expect(table.value(for: "tile\u{212A}") == 1)
        #expect(table.value(for: "tile\u{212A}", orInsert: 9) == 1)
        table.set(2, for: "a\u{37E}b\u{1FEF}")
        #expect(table.value(for: "a;b`") == 2)
        #expect(table.count == 2)
        #expect(table.remove("tile\u{212A}") == 1)
        #expect(table.value(for: "tileK") == nil && table.count == 1)
        #expect(ModelTable.asciiTwin(of: "caf\u{E9}") == nil, "an id with any other scalar has no ASCII twin")
    }

    /// Removal, checked against a `Dictionary` through thousands of random sets, finds-or-inserts
    /// and removals on a
    /// pool of ids small enough that probe runs collide and wrap: every id set and not removed is
    /// found with its value, every other is not. Without moving later cells back into a removed
    /// one, ids further along its probe run are lost.
    @Test func removalKeepsEveryOtherIdFoundAsADictionaryWould() {
        var generator = SeededGenerator(state: 0x5EED)
        let pool = (0..<96).map { index -> String in
            switch index % 4 {
            case 0: "m\(index)"
            case 1: "a-long-model-identifier-\(index)-of-some-length"
            case 2: "tile-\(index)"
            default: "caf\u{E9}-\(index)"  // not ASCII: kept apart, as the store compares it
            }
        }
        var table = ModelTable()
        var reference: [String: Int32] = [:]
        for step in 0..<20_000 {
            let id = pool[Int(generator.next() % UInt64(pool.count))]
            let choice = generator.next() % 4
            if choice == 0 {
                #expect(table.remove(id) == reference.removeValue(forKey: id))
            } else if choice == 1 {
                // Found, or entered with this step's value: one probe for a buffer's first change.
                let existing = reference[id]
                #expect(table.value(for: id, orInsert: Int32(step)) == existing)
                if existing == nil { reference[id] = Int32(step) }
            } else {
                table.set(Int32(step), for: id)
                reference[id] = Int32(step)
            }
            if step % 97 == 0 {
                #expect(table.count == reference.count)
                for candidate in pool { #expect(table.value(for: candidate) == reference[candidate]) }
            }
        }
        for id in pool { table.remove(id) }
        #expect(table.isEmpty)
    }
}


@Suite struct ModelTableCapacityTests {
    @Test func aTableReservedAheadFindsEveryIdAndStillGrowsPastIt() {
        var table = ModelTable()
        table.set(7, for: "before")
        table.reserveCapacity(1000)
        for n in 0..<1500 { table.set(Int32(n), for: "model-\(n)") }
        #expect(table.value(for: "before") == 7)
        #expect((0..<1500).allSatisfy { table.value(for: "model-\($0)") == Int32($0) })
        #expect(table.value(for: "model-1500") == nil)
        #expect(table.count == 1501)
    }

    @Test func slotsRestoredWithTheirTagsKeepThem() {
        var slots = ModelSlots()
        slots.reserveCapacity(3)
        slots.updateValue(["n": 1], forKey: "a", version: 4)
        slots.updateValue(["n": 2], forKey: "b", version: 9)
        slots.updateValue(["n": 3], forKey: "a", version: 11)
        #expect(slots.count == 2)
        #expect(slots["a"] == ["n": 3] && slots.version(of: "a") == 11)
        #expect(slots.version(of: "b") == 9)
        slots.removeValue(forKey: "a")
        slots.updateValue(["n": 5], forKey: "c")
        #expect(slots.version(of: "c") == 0)
    }
}
