import Dispatch
import Glibc
import ReceptionistJSON
@testable import ReceptionistModel
import ReceptionistSync
import Testing

/// A journal that keeps what it is handed, for the test to settle or fail by hand.
private final class FakeJournal: StoreJournal {
    let records = PThreadLock<[JournalRecord]>([])
    func append(_ record: JournalRecord, of store: ModelStore) { records.withLock { $0.append(record) } }
    func createStore(_ store: ModelStore) throws(StoreError) {}
    func deleteStore(_ name: String) throws(StoreError) {}
    var handed: [JournalRecord] { records.withLock { $0 } }
}

private final class Answers: Sendable {
    let results = PThreadLock<[Result<ChangeSet, StoreError>]>([])
    func add(_ result: Result<ChangeSet, StoreError>) { results.withLock { $0.append(result) } }
    var all: [Result<ChangeSet, StoreError>] { results.withLock { $0 } }
}

/// A journal whose disk refuses to delete a store.
private final class RefusingJournal: StoreJournal {
    func append(_ record: JournalRecord, of store: ModelStore) { store.settle(through: record.changeSet.version, generation: record.generation) }
    func createStore(_ store: ModelStore) throws(StoreError) {}
    func deleteStore(_ name: String) throws(StoreError) { throw .storageFailed("the disk is full") }
}

/// A journal whose disk does not answer in time: each write stays queued, to be written later.
private final class LateJournal: StoreJournal {
    func append(_ record: JournalRecord, of store: ModelStore) { store.settle(through: record.changeSet.version, generation: record.generation) }
    func createStore(_ store: ModelStore) throws(StoreError) { throw .outcomeUnknown("the disk did not answer within 30 s") }
    func deleteStore(_ name: String) throws(StoreError) { throw .outcomeUnknown("the disk did not answer within 30 s") }
}

@Suite struct ModelStoreJournalTests {
    /// A creation or deletion the disk did not answer in time is kept in its queue and will be
    /// written: the registry shows what the disk will hold. A late deletion put the store back,
    /// readable while its writes were refused, and gone after a restart; a late creation took it
    /// away, to come back after a restart.
    @Test func aStoreCreatedOrDeletedLateIsAsTheDiskWillHaveIt() throws {
        let registry = StoreRegistry(historyLimit: 10, journal: LateJournal())
        #expect(throws: StoreError.outcomeUnknown("the disk did not answer within 30 s; the store may or may not be created")) {
            try registry.create("s")
        }
        let store = try #require(registry.store("s"))
        try store.commit([.put(model: "a", value: ["n": 1])])
        #expect(throws: StoreError.outcomeUnknown("the disk did not answer within 30 s; the store may or may not be deleted")) {
            try registry.delete("s")
        }
        #expect(registry.store("s") == nil)
        #expect(store.isDeleted)
    }

    /// A delete the journal refuses deletes nothing: the store is still there, as it was.
    @Test func aStoreDeleteTheJournalRefusesLeavesTheStore() throws {
        let registry = StoreRegistry(historyLimit: 10, journal: RefusingJournal())
        let store = try registry.create("s")
        try store.commit([.put(model: "a", value: ["n": 1])])
        #expect(throws: StoreError.storageFailed("the disk is full")) { try registry.delete("s") }
        #expect(registry.store("s") === store)
        #expect(store.version == 1 && store.snapshot().models == ["a": ["n": 1]])
    }

    private func journaled() -> (ModelStore, FakeJournal, Answers, PThreadLock<[UInt64]>, ObservationToken) {
        let journal = FakeJournal()
        let store = ModelStore(name: "s", journal: journal)
        let seen = PThreadLock<[UInt64]>([])
        let token = store.observe { changeSet in seen.withLock { $0.append(changeSet.version) } }
        return (store, journal, Answers(), seen, token)
    }

    @Test func aCommitIsSeenByNobodyUntilItsJournalStoredIt() throws {
        let (store, journal, answers, seen, token) = journaled()
        defer { token.cancel() }
        store.commit([.put(model: "a", value: ["n": 1])], completion: answers.add)
        store.commit([.set(model: "a", keyPath: "n", value: 2)], completion: answers.add)
        #expect(journal.handed.map(\.changeSet.version) == [1, 2])
        // A journal's snapshot of the models is of the head, settled or not, at its version.
        let snapshot = store.journalSnapshot(changedAfter: 0)
        #expect(snapshot.version == 2 && snapshot.generation == journal.handed[1].generation)
        #expect(snapshot.models.map(\.id) == ["a"] && snapshot.models.map(\.tag) == [2])
        #expect(snapshot.models.first?.value == ["n": 2])
        #expect(store.journalSnapshot(changedAfter: 2).models.isEmpty)
        #expect(store.version == 0)
        #expect(store.snapshot().models.isEmpty)
        #expect(store.modelCount == (0, 0), "a listing counts no model that is not stored yet")
        #expect(store.changes(since: 0) == [])
        #expect(seen.withLock { $0 }.isEmpty)
        #expect(answers.all.isEmpty)

        store.settle(through: 1, generation: journal.handed[0].generation)
        #expect(store.version == 1)
        #expect(store.snapshot().models == ["a": ["n": 1]])
        #expect(store.modelCount == (1, 1))
        #expect(seen.withLock { $0 } == [1])
        #expect(answers.all.count == 1)

        store.settle(through: 2, generation: journal.handed[1].generation)
        #expect(store.version == 2)
        #expect(store.model("a")?.value == ["n": 2])
        #expect(store.model("a")?.tag == 2)
        #expect(seen.withLock { $0 } == [1, 2])
        #expect(try answers.all.map { try $0.get().version } == [1, 2])
        #expect(store.changes(since: 0)?.map(\.version) == [1, 2])
        // A deletion being stored still counts the model; once stored, not.
        store.commit([.delete(model: "a")], completion: answers.add)
        #expect(store.modelCount == (1, 2))
        store.settle(through: 3, generation: journal.handed[2].generation)
        #expect(store.modelCount == (0, 3))
    }

    @Test func aCommitIsComputedOnTheHeadSoCommitsPipelineAndConditionsSeeThem() throws {
        let (store, journal, answers, _, token) = journaled()
        defer { token.cancel() }
        store.commit([.put(model: "a", value: ["n": 1])], completion: answers.add)
        // Not settled yet, but the next commit applies after it: the condition sees version 1.
        store.commit([.set(model: "a", keyPath: "n", value: 2)], if: CommitCondition(storeVersion: 1), completion: answers.add)
        store.commit([.set(model: "a", keyPath: "n", value: 3)], if: CommitCondition(storeVersion: 1), completion: answers.add)
        #expect(journal.handed.count == 2)
        // The refusal names version 2, so it waits until version 2 is stored.
        #expect(answers.all.isEmpty)
        store.settle(through: 2, generation: journal.handed[1].generation)
        guard answers.all.count == 3, case .failure(.preconditionFailed(_, let version)) = answers.all[2] else {
            Issue.record("expected the third commit refused once the first two were stored: \(answers.all)")
            return
        }
        #expect(version == 2)
        #expect(try answers.all.prefix(2).map { try $0.get().version } == [1, 2])
    }

    /// A refusal that would name a version still being stored waits for it: if storing it fails,
    /// the refusal is the failure, and the version it would have named is never seen (the next
    /// commit takes it).
    @Test func aRefusalNamingAVersionThatFailsToBeStoredIsTheFailure() throws {
        let (store, journal, answers, _, token) = journaled()
        defer { token.cancel() }
        store.commit([.put(model: "a", value: ["n": 1])], completion: answers.add)
        store.commit([.put(model: "a", value: ["n": 2])], if: CommitCondition(storeVersion: 0), completion: answers.add)
        #expect(answers.all.isEmpty)
        store.unsettle(generation: journal.handed[0].generation, because: .storageFailed("the disk is full"))
        #expect(answers.all == [.failure(.storageFailed("the disk is full")), .failure(.storageFailed("the disk is full"))])
        store.commit([.put(model: "b", value: [:])], completion: answers.add)
        #expect(journal.handed.last?.changeSet.version == 1)
    }

    @Test func whenTheJournalFailsEveryUnsettledCommitIsUndoneAndAnswered() throws {
        let (store, journal, answers, seen, token) = journaled()
        defer { token.cancel() }
        store.commit([.put(model: "a", value: ["n": 1])], completion: answers.add)
        store.settle(through: 1, generation: journal.handed[0].generation)
        store.commit([.set(model: "a", keyPath: "n", value: 2)], completion: answers.add)
        store.commit([.put(model: "b", value: ["x": true])], completion: answers.add)
        store.commit([.delete(model: "a")], completion: answers.add)
        let generation = journal.handed[1].generation
        store.unsettle(generation: generation, because: .storageFailed("the disk is full"))
        #expect(answers.all.count == 4)
        #expect(answers.all.dropFirst().allSatisfy { $0 == .failure(.storageFailed("the disk is full")) })
        #expect(store.version == 1)
        #expect(store.snapshot().models == ["a": ["n": 1]])
        #expect(store.model("a")?.tag == 1)
        #expect(!store.isCurrent(generation: generation))
        // A late answer for the old generation changes nothing; the store goes on from version 1.
        store.settle(through: 4, generation: generation)
        #expect(store.version == 1)
        #expect(seen.withLock { $0 } == [1])
        store.commit([.set(model: "a", keyPath: "n", value: 9)], completion: answers.add)
        #expect(journal.handed.last?.changeSet.version == 2)
        #expect(journal.handed.last?.generation == generation + 1)
        store.settle(through: 2, generation: generation + 1)
        #expect(store.model("a")?.value == ["n": 9])
        #expect(seen.withLock { $0 } == [1, 2])
    }

    /// Commits that change nothing wait behind the unsettled one before them, and make no
    /// version: readers still see the settled version (counted as versions, the four entries
    /// behind version 2 read it as below 0, a crash), and a failure undoes to it.
    @Test func commitsThatChangeNothingBehindAnUnsettledOneMakeNoVersion() throws {
        let (store, journal, answers, seen, token) = journaled()
        defer { token.cancel() }
        store.commit([.put(model: "a", value: ["n": 1])], completion: answers.add)
        store.settle(through: 1, generation: journal.handed[0].generation)
        store.commit([.set(model: "a", keyPath: "n", value: 2)], completion: answers.add)
        for _ in 0..<3 { store.commit([.patch(model: "a", patch: ["n": 2])], completion: answers.add) }
        #expect(journal.handed.map(\.changeSet.version) == [1, 2])
        #expect(store.version == 1)
        #expect(store.snapshot().version == 1 && store.snapshot().models == ["a": ["n": 1]])
        #expect(store.modelCount.version == 1)

        store.settle(through: 2, generation: journal.handed[1].generation)
        #expect(store.version == 2)
        #expect(try answers.all.map { try $0.get().version } == [1, 2, 2, 2, 2])
        #expect(seen.withLock { $0 } == [1, 2])

        // A failure undoes to the settled version, not below it.
        store.commit([.set(model: "a", keyPath: "n", value: 3)], completion: answers.add)
        store.commit([.patch(model: "a", patch: ["n": 3])], completion: answers.add)
        store.unsettle(generation: journal.handed[2].generation, because: .storageFailed("the disk is full"))
        #expect(store.version == 2)
        #expect(store.snapshot().models == ["a": ["n": 2]])
        store.commit([.set(model: "a", keyPath: "n", value: 4)], completion: answers.add)
        #expect(journal.handed.last?.changeSet.version == 3)
    }

    /// A model that a change set not yet stored touches is read at once, as it was before that
    /// change set, with the tag it had then: a slow disk holds no reader. Once stored, the change
    /// shows.
    @Test func aReadOfAModelThatIsBeingStoredShowsItAsItWasWithoutWaiting() throws {
        let (store, journal, answers, _, token) = journaled()
        defer { token.cancel() }
        store.commit([.put(model: "a", value: ["n": 1]), .put(model: "c", value: ["k": true])], completion: answers.add)
        store.settle(through: 1, generation: journal.handed[0].generation)
        store.commit([.set(model: "a", keyPath: "n", value: 2), .set(model: "c", keyPath: "k", value: nil)], completion: answers.add)
        store.commit([.put(model: "b", value: [:]), .set(model: "a", keyPath: "m", value: 3)], completion: answers.add)
        store.commit([.delete(model: "c")], completion: answers.add)
        let start = DispatchTime.now().uptimeNanoseconds
        let a = store.model("a"), b = store.model("b"), c = store.model("c")
        #expect(DispatchTime.now().uptimeNanoseconds - start < 100_000_000, "no read waited for the disk")
        #expect(a?.value == ["n": 1] && a?.tag == 1 && a?.version == 1)
        #expect(b == nil, "made by a change set not yet stored")
        #expect(c?.value == ["k": true] && c?.tag == 1)
        store.settle(through: 2, generation: journal.handed[1].generation)
        #expect(store.model("a")?.value == ["n": 2] && store.model("a")?.tag == 2)
        #expect(store.model("c")?.value == [:] && store.model("c")?.tag == 2)
        store.settle(through: 4, generation: journal.handed[3].generation)
        #expect(store.model("a")?.value == ["n": 2, "m": 3] && store.model("a")?.tag == 3)
        #expect(store.model("b")?.value == [:] && store.model("c") == nil)
        #expect(answers.all.count == 4)
    }

    @Test func theBlockingCommitWaitsForTheJournal() throws {
        let (store, journal, _, _, token) = journaled()
        defer { token.cancel() }
        let settler = WorkerThread.start {
            for _ in 0..<200 where journal.handed.isEmpty { usleep(5_000) }
            if let record = journal.handed.first { store.settle(through: 1, generation: record.generation) }
        }
        let changeSet = try store.commit([.put(model: "a", value: [:])])
        settler.join()
        #expect(changeSet.version == 1)
        #expect(store.version == 1)
    }
}
