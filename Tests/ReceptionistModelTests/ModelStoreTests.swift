import Dispatch
import ReceptionistJSON
@testable import ReceptionistModel
import ReceptionistSync
import Testing

@Suite struct ModelStoreTests {
    @Test func commitsProduceChangesWithVersions() throws {
        let store = ModelStore(name: "s")
        let first = try store.commit([.put(model: "m", value: ["color": "#000000", "style": ["border": ["width": 1]]])])
        #expect(first.version == 1)
        #expect(first.changes == [ModelChange(model: "m", keyPath: .whole, oldValue: nil, newValue: ["color": "#000000", "style": ["border": ["width": 1]]])])
        #expect(first.changes[0].kind == .created)

        let second = try store.commit([.set(model: "m", keyPath: "style.border.width", value: 2)])
        #expect(second.version == 2)
        #expect(second.changes == [ModelChange(model: "m", keyPath: "style.border.width", oldValue: 1, newValue: 2)])

        let third = try store.commit([.patch(model: "m", patch: ["color": "#ffffff", "style": nil])])
        #expect(third.version == 3)
        #expect(Set(third.changes) == [
            ModelChange(model: "m", keyPath: "color", oldValue: "#000000", newValue: "#ffffff"),
            ModelChange(model: "m", keyPath: "style", oldValue: ["border": ["width": 2]], newValue: nil),
        ])
        #expect(store.model("m")?.value == ["color": "#ffffff"])

        #expect(store.modelCount == (1, 3))

        let deletion = try store.commit([.delete(model: "m")])
        #expect(deletion.changes.first?.kind == .deleted)
        #expect(store.model("m") == nil)
        #expect(store.version == 4)
        #expect(store.modelCount == (0, 4))
    }

    @Test func aSetThatCreatesAnAncestorIsReportedAtThatAncestor() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["a": 5, "b": ["c": 1]])])
        // `style` is missing: the change creates it, so it is reported there, with no old value.
        let created = try store.commit([.set(model: "m", keyPath: "style.border.width", value: 2)])
        #expect(created.changes == [ModelChange(model: "m", keyPath: "style", oldValue: nil, newValue: ["border": ["width": 2]])])
        // `a` is a number: the change turns it into an object, reported at `a` with the number as old.
        let reshaped = try store.commit([.set(model: "m", keyPath: "a.x", value: 1)])
        #expect(reshaped.changes == [ModelChange(model: "m", keyPath: "a", oldValue: 5, newValue: ["x": 1])])
        // Every ancestor exists: reported at the path itself.
        let plain = try store.commit([.set(model: "m", keyPath: "b.d", value: 3)])
        #expect(plain.changes == [ModelChange(model: "m", keyPath: "b.d", oldValue: nil, newValue: 3)])
        #expect(store.model("m")?.value == ["a": ["x": 1], "b": ["c": 1, "d": 3], "style": ["border": ["width": 2]]])
    }

    @Test func removingWhatIsNotThereChangesNothingAndMakesNoVersion() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["a": 5])])
        let seen = PThreadLock(0)
        let token = store.observe { _ in seen.withLock { $0 += 1 } }
        let absent = try store.commit([.set(model: "m", keyPath: "x.y", value: nil)])
        #expect(absent.changes.isEmpty && absent.version == 1)
        // Removing beneath a number leaves the number alone.
        let beneath = try store.commit([.set(model: "m", keyPath: "a.b", value: nil)])
        #expect(beneath.changes.isEmpty && beneath.version == 1)
        #expect(store.model("m")?.value == ["a": 5] && store.model("m")?.tag == 1)
        #expect(seen.withLock { $0 } == 0)
        token.cancel()
    }

    /// A `set` or a `put` of the value already there (byte for byte, members in their order) makes
    /// no version and leaves the model's tag, as a `patch` to the same values does; one that
    /// changes a member's order, a number's text or a string's bytes is a change. (Each made a
    /// version, moved the ETag and sent every subscriber the same value again.)
    @Test func writingTheValueAlreadyThereMakesNoVersion() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["a": 5, "b": ["c": "é"]])])
        let seen = PThreadLock(0)
        let token = store.observe { _ in seen.withLock { $0 += 1 } }
        for same: StoreOperation in [
            .put(model: "m", value: ["a": 5, "b": ["c": "é"]]), .set(model: "m", keyPath: "a", value: 5),
            .set(model: "m", keyPath: "b.c", value: "é"), .patch(model: "m", patch: ["a": 5]),
        ] {
            let answer = try store.commit([same])
            #expect(answer.changes.isEmpty && answer.version == 1, "\(same)")
        }
        #expect(store.model("m")?.tag == 1 && seen.withLock { $0 } == 0)
        let reordered = try store.commit([.put(model: "m", value: ["b": ["c": "é"], "a": 5])])
        #expect(reordered.version == 2, "members in another order are another value")
        let otherText = try store.commit([.set(model: "m", keyPath: "a", value: try JSONParser.parse(Array("5.0".utf8)))])
        #expect(otherText.version == 3, "5.0 is not 5")
        let otherBytes = try store.commit([.set(model: "m", keyPath: "b.c", value: "e\u{301}")])
        #expect(otherBytes.version == 4, "é written another way is another value")
        token.cancel()
    }

    @Test func modelIDsAreOneTo128BytesWithoutSlashOrControlCharacters() {
        let store = ModelStore(name: "s")
        // `.` and `..` are refused: no URL can name them (a client resolves `/models/..` to the
        // store itself, and a DELETE of it deleted the store).
        for bad in [".", "..", "", "a/b", "a\u{7F}", "tab\t", String(repeating: "x", count: 129), String(repeating: "é", count: 65)] {
            #expect(throws: StoreError.self) { try store.commit([.put(model: bad, value: ["n": 1])]) }
        }
        for good in ["a", "tile-1", "snow ☃", "...", ".a", "a..", String(repeating: "é", count: 64)] {
            #expect(throws: Never.self) { try store.commit([.put(model: good, value: ["n": 1])]) }
        }
    }

    @Test func aFailedCommitChangesNothing() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "a", value: ["x": 1]), .put(model: "b", value: ["x": 1])])
        let before = store.snapshot()
        let attempts: [[StoreOperation]] = [
            [.set(model: "a", keyPath: "x", value: 2), .delete(model: "missing")],
            [.put(model: "c", value: ["x": 1]), .patch(model: "a", patch: [1])],
            [.delete(model: "a"), .put(model: "b", value: "not an object")],
            [.set(model: "a", keyPath: .whole, value: 3)],
            [.put(model: "bad/id", value: [:])],
            [],
        ]
        for operations in attempts {
            #expect(throws: StoreError.self) { try store.commit(operations) }
            let after = store.snapshot()
            #expect(after.version == before.version)
            #expect(after.models == before.models)
        }
    }

    @Test func historyServesRecentChangeSetsOnly() throws {
        let store = ModelStore(name: "s", historyLimit: 3)
        try store.commit([.put(model: "m", value: ["n": 0])])
        for n in 1...5 {
            try store.commit([.set(model: "m", keyPath: "n", value: .number(JSONNumber(Double(n))))])
        }
        #expect(store.changes(since: 6) == [])
        #expect(store.changes(since: 3)?.map(\.version) == [4, 5, 6])
        #expect(store.changes(since: 2) == nil)
    }

    @Test(.timeLimit(.minutes(10)))
    func concurrentCommitsHaveGaplessVersionsAndAtomicSnapshots() throws {
        let threads = 8
        let perThread = Int(100_000 * stressScale)
        let store = ModelStore(name: "s")
        try store.commit((0..<64).map { .put(model: "m\($0)", value: ["color": -1, "twin": -1]) })

        // Every observer call must see versions strictly rising by one.
        let seen = PThreadLock((last: UInt64(1), gaps: 0, halves: 0))
        let token = store.observe(options: .both) { changeSet in
            seen.withLock { seen in
                if changeSet.version != seen.last + 1 { seen.gaps += 1 }
                seen.last = changeSet.version
                // Pairs committed together arrive together.
                if changeSet.changes.count != 2 { seen.halves += 1 }
            }
        }
        let group = DispatchGroup()
        for t in 0..<threads {
            DispatchQueue.global().async(group: group) {
                for i in 0..<perThread {
                    let model = "m\((t * 7 + i) % 64)"
                    let value = JSONValue.number(JSONNumber(Double(t * perThread + i)))
                    try! store.commit([.set(model: model, keyPath: "color", value: value),
                                       .set(model: model, keyPath: "twin", value: value)])
                }
            }
        }
        // Meanwhile snapshots are always consistent: both halves of a pair always match.
        var inconsistent = 0
        while group.wait(timeout: .now() + 0.001) == .timedOut {
            let snapshot = store.snapshot()
            for model in snapshot.models.values where model["color"] != model["twin"] {
                inconsistent += 1
            }
        }
        withExtendedLifetime(token) {}
        #expect(inconsistent == 0)
        #expect(store.version == UInt64(1 + threads * perThread))
        let result = seen.withLock { $0 }
        #expect(result.gaps == 0)
        #expect(result.halves == 0)
        #expect(result.last == store.version)
    }

    @Test func commitFromInsideAnObserverIsRefused() throws {
        let store = ModelStore(name: "s")
        let outcome = PThreadLock<StoreError?>(nil)
        let token = store.observe { _ in
            do throws(StoreError) {
                try store.commit([.put(model: "other", value: [:])])
            } catch {
                outcome.withLock { $0 = error }
            }
        }
        try store.commit([.put(model: "m", value: [:])])
        #expect(outcome.withLock { $0 } == .reentrantCommit)
        #expect(store.version == 1)
        token.cancel()
    }

    /// An epoch is 64 bits as sixteen lower-case hex digits, leading zeros kept, and no two alike.
    @Test func epochsAreSixteenHexDigitsAndDistinct() {
        let epochs = (0..<4096).map { _ in ModelStore.newEpoch() }
        #expect(Set(epochs).count == epochs.count)
        for epoch in epochs {
            #expect(epoch.utf8.count == 16 && UInt64(epoch, radix: 16) != nil)
            #expect(epoch.allSatisfy { "0123456789abcdef".contains($0) }, "\(epoch)")
        }
        // Over 4,096 epochs each of the 16 digits shows in the first place: the top bits are written.
        #expect(Set(epochs.map { $0.first! }).count == 16)
    }

    /// An id written with the Kelvin sign names the model written with `K`, as every snapshot
    /// (keyed as Swift compares strings) already took it: one model, keeping the id it was made with.
    @Test func anIdCanonicallyEqualToAnotherNamesTheSameModel() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "tileK", value: ["n": 1])])
        try store.commit([.put(model: "tile\u{212A}", value: ["n": 2])])
        try store.commit([.patch(model: "tile\u{212A}", patch: ["m": 3])])
        let snapshot = store.snapshot()
        #expect(store.modelCount.models == 1 && snapshot.models.count == 1)
        #expect(snapshot.models["tileK"] == ["n": 2, "m": 3])
        // Deleted under the ASCII spelling, in a commit that also puts: the change names the
        // model by the id it was made with, as every snapshot did.
        let deleted = try store.commit([.put(model: "other", value: [:]), .delete(model: "tileK")])
        #expect(deleted.changes.map { Array($0.model.utf8) } == [Array("other".utf8), Array("tileK".utf8)])
        let kelvin = ModelStore(name: "k")
        try kelvin.commit([.put(model: "tile\u{212A}", value: ["n": 1])])
        let gone = try kelvin.commit([.put(model: "other", value: [:]), .delete(model: "tileK")])
        #expect(gone.changes.map { Array($0.model.utf8) } == [Array("other".utf8), Array("tile\u{212A}".utf8)])
        #expect(kelvin.snapshot().models.keys.sorted() == ["other"])
    }
}
