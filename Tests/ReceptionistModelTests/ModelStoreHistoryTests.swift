import ReceptionistJSON
@testable import ReceptionistModel
import Testing

/// `value` with every object's members in key order.
private func unordered(_ value: JSONValue) -> JSONValue {
    switch value {
    case .object(let members): .sortedObject(Dictionary(uniqueKeysWithValues: members.map { ($0.key, unordered($0.value)) }))
    case .array(let items): .array(items.map(unordered))
    default: value
    }
}

@Suite struct ModelStoreHistoryTests {
    /// A store with a put, sets, a patch that removes, a reshaping set and a delete, and every
    /// snapshot taken along the way.
    private func recorded(historyLimit: Int = 100) throws -> (ModelStore, [UInt64: [String: JSONValue]]) {
        let store = ModelStore(name: "s", historyLimit: historyLimit)
        var snapshots: [UInt64: [String: JSONValue]] = [0: [:]]
        let steps: [[StoreOperation]] = [
            [.put(model: "a", value: ["color": "red", "style": ["w": 1]])],
            [.put(model: "b", value: ["color": "blue"])],
            [.set(model: "a", keyPath: "color", value: "green")],
            [.patch(model: "a", patch: ["style": nil, "size": 3])],
            [.set(model: "b", keyPath: "deep.er.path", value: 1)],
            [.delete(model: "a")],
            [.put(model: "a", value: ["again": true]), .set(model: "b", keyPath: "color", value: nil)],
        ]
        for step in steps {
            let changeSet = try store.commit(step)
            snapshots[changeSet.version] = store.snapshot().models
        }
        return (store, snapshots)
    }

    @Test func everyPastVersionReadsExactlyAsItWas() throws {
        let (store, snapshots) = try recorded()
        for (version, models) in snapshots {
            let past = try store.snapshot(at: version).get()
            #expect(past.version == version)
            // The same members and values; a member that a later change removed comes back last
            // (its place among its siblings is not recorded), so members are compared unordered.
            #expect(past.models.mapValues(unordered) == models.mapValues(unordered), "version \(version)")
        }
    }

    @Test func aVersionAheadIsInvalidAndOneOlderThanTheHistoryIsGone() throws {
        let (store, snapshots) = try recorded(historyLimit: 3)
        #expect(throws: StoreError.self) { try store.snapshot(at: 8).get() }
        // Versions 5, 6 and 7 are kept: the oldest readable is 4.
        #expect(try store.snapshot(at: 4).get().models == snapshots[4])
        switch store.snapshot(at: 3) {
        case .failure(.gone(_, let oldest)): #expect(oldest == 4)
        default: Issue.record("expected gone")
        }
        switch store.changes(after: 2, limit: 10) {
        case .failure(.gone(_, let oldest)): #expect(oldest == 4)
        default: Issue.record("expected gone")
        }
    }

    @Test func changesAreReadBetweenVersionsUpToALimit() throws {
        let (store, _) = try recorded()
        #expect(try store.changes(after: 0, limit: 100).get().map(\.version) == [1, 2, 3, 4, 5, 6, 7])
        #expect(try store.changes(after: 2, limit: 2).get().map(\.version) == [3, 4])
        #expect(try store.changes(after: 2, until: 5, limit: 100).get().map(\.version) == [3, 4, 5])
        #expect(try store.changes(after: 7, limit: 100).get().isEmpty)
        #expect(try store.changes(after: 3, limit: 0).get().isEmpty)
    }

    @Test func changeSetsFromASharedLogCloseTheGapBelowTheHistoryOnlyWhenWhole() throws {
        let (full, snapshots) = try recorded(historyLimit: 100)
        let (store, _) = try recorded(historyLimit: 3)
        let log = try full.changes(after: 0, limit: 100).get()
        #expect(store.historyFloor == 4)
        // Versions 1...4 come from the log: every version reads as it was.
        for version in UInt64(0)...7 {
            let past = try store.snapshot(at: version, older: log).get()
            #expect(past.models.mapValues(unordered) == snapshots[version]!.mapValues(unordered), "version \(version)")
        }
        #expect(try store.changes(after: 1, limit: 100, older: log).get().map(\.version) == [2, 3, 4, 5, 6, 7])
        // A log with a hole, or one that does not reach down far enough, is not used.
        let holed = log.filter { $0.version != 3 }
        #expect(throws: StoreError.self) { try store.snapshot(at: 1, older: holed).get() }
        #expect(throws: StoreError.self) { try store.changes(after: 0, limit: 10, older: Array(log.dropFirst())).get() }
    }
}
