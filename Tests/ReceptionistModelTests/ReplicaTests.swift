import ReceptionistJSON
@testable import ReceptionistModel
import ReceptionistSync
import Testing

@Suite struct ReplicaTests {
    /// A change set encoded for the log, applied to a replica, gives the origin's state and changes.
    @Test func aReplicaFollowsTheOriginThroughTheLog() throws {
        let origin = ModelStore(name: "s")
        let replica = ModelStore(name: "s")
        let commits: [[StoreOperation]] = [
            [.put(model: "a", value: ["style": ["border": ["width": 1]], "x_y": 1])],
            [.patch(model: "a", patch: ["style": ["border": ["width": 3]], "label": "A", "x_y": .null])],
            [.set(model: "a", keyPath: "style.color", value: "red"), .put(model: "b", value: [:])],
            [.delete(model: "b")],
            [.put(model: "q\"\\é", value: ["é": "😀 \u{1}", "n": -9_223_372_036_854_775_807, "f": 1.5])],
            [.set(model: "q\"\\é", keyPath: ModelKeyPath(["a-b", "c\""]), value: [1, [true, .null]])],
        ]
        for operations in commits {
            let changeSet = try origin.commit(operations)
            let entry = try #require(ReplicatedChangeSet.decode(JSONParser.parse(JSONWriter.encode(ReplicatedChangeSet.encode(changeSet)))))
            #expect(replica.applyReplicated(version: entry.version, committedAt: entry.committedAt, changes: entry.changes))
            #expect(replica.changes(since: changeSet.version - 1)?.first?.changes == changeSet.changes)
            // Read back from the log, it is the change set observers saw, old values included.
            let readBack = try JSONParser.parse(JSONWriter.encode(ReplicatedChangeSet.encode(changeSet)))
            #expect(ReplicatedChangeSet.changeSet(of: "s", readBack) == changeSet)
            // What the disk engine stores, written with no tree, is the same text.
            let text = JSONBuffer(capacity: 16)
            ReplicatedChangeSet.write(changeSet, to: text)
            #expect(text.bytes == JSONWriter.encode(ReplicatedChangeSet.encode(changeSet)))
        }
        #expect(replica.snapshot().models == origin.snapshot().models && replica.version == origin.version)
    }

    @Test func onlyTheNextVersionApplies() {
        let replica = ModelStore(name: "s")
        let put = [ReplicatedChange(model: "a", keyPath: .whole, value: ["n": 1])]
        #expect(!replica.applyReplicated(version: 2, committedAt: 0, changes: put))
        #expect(replica.applyReplicated(version: 1, committedAt: 0, changes: put))
        #expect(!replica.applyReplicated(version: 1, committedAt: 0, changes: put))
        // A nested change to a model the replica does not have does not fit: nothing changes.
        #expect(!replica.applyReplicated(version: 2, committedAt: 0, changes: [ReplicatedChange(model: "b", keyPath: "n", value: 2)]))
        #expect(replica.version == 1 && replica.modelIDs == ["a"])
    }

    @Test func aResetTellsObserversOnceWithTheDifference() {
        let replica = ModelStore(name: "s")
        _ = replica.applyReplicated(version: 1, committedAt: 0, changes: [ReplicatedChange(model: "a", keyPath: .whole, value: ["n": 1])])
        let seen = ChangeSetLog()
        let token = replica.observe { changeSet in seen.append(changeSet) }
        replica.resetReplica(models: ["b": ["n": 2]], version: 7)
        replica.resetReplica(models: ["b": ["n": 2]], version: 7)
        token.cancel()
        let changeSets = seen.all
        #expect(changeSets.count == 1)
        #expect(changeSets.first?.isReset == true && changeSets.first?.version == 7)
        #expect(Set(changeSets.first?.changes.map(\.model) ?? []) == ["a", "b"])
        #expect(replica.version == 7 && replica.changes(since: 1) == nil)
        #expect(replica.waitUntilApplied(7, seconds: 0))
    }
}

/// Collects change sets from the committing thread.
final class ChangeSetLog: Sendable {
    private let items = PThreadLock<[ChangeSet]>([])
    func append(_ changeSet: ChangeSet) { items.withLock { $0.append(changeSet) } }
    var all: [ChangeSet] { items.withLock { $0 } }
}
