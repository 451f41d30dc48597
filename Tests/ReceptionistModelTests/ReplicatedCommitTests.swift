import Glibc
import ReceptionistJSON
@testable import ReceptionistModel
import ReceptionistSync
import Testing

/// A replica's commits without a waiting thread: the log here holds every commit until the test
/// answers it, as Redis answers the gateway's later, on another thread.
@Suite struct ReplicatedCommitTests {
    /// The shared log, answered by hand. A `.committed` answer is given, as the real one is, only
    /// after the replica has applied the change set.
    final class HeldLog: StoreReplication {
        struct Sent: Sendable {
            let changeSet: ChangeSet
            let expectedVersion: UInt64
            let completion: @Sendable (ReplicationOutcome) -> Void
        }

        private let held = PThreadLock<[Sent]>([])
        /// When set, every commit is answered with it at once, before `commit` returns.
        let immediate = PThreadLock<ReplicationOutcome?>(nil)

        func commit(
            _ changeSet: ChangeSet, models: [String: JSONValue?], expectedVersion: UInt64, epoch: String,
            completion: @escaping @Sendable (ReplicationOutcome) -> Void
        ) {
            if let now = immediate.withLock({ $0 }) { return completion(now) }
            held.withLock { $0.append(Sent(changeSet: changeSet, expectedVersion: expectedVersion, completion: completion)) }
        }

        func createStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void) { completion(nil) }
        func deleteStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void) { completion(nil) }

        var sent: [Sent] { held.withLock { $0 } }

        /// Takes the oldest held commit into `replica` and answers it committed.
        func commitOldest(into replica: ModelStore) {
            let next = held.withLock { $0.removeFirst() }
            let entry = next.changeSet
            let changes = entry.changes.map { ReplicatedChange(model: $0.model, keyPath: $0.keyPath, value: $0.newValue) }
            #expect(replica.applyReplicated(version: entry.version, committedAt: entry.committedAtMicroseconds, changes: changes))
            next.completion(.committed(entry.version))
        }

        func answerOldest(_ outcome: ReplicationOutcome) {
            held.withLock { $0.removeFirst() }.completion(outcome)
        }
    }

    /// Answers in the order they came.
    final class Answers: Sendable {
        private let items = PThreadLock<[Result<ChangeSet, StoreError>]>([])
        func record(_ result: Result<ChangeSet, StoreError>) { items.withLock { $0.append(result) } }
        var all: [Result<ChangeSet, StoreError>] { items.withLock { $0 } }
        var versions: [UInt64?] { all.map { try? $0.get().version } }
    }

    private func put(_ model: String, _ n: Int) -> [StoreOperation] {
        [.put(model: model, value: ["n": .number(JSONNumber(Double(n)))])]
    }

    @Test func theQueueStartsOneHoldsTheRestInOrderAndRefusesPastItsLimit() {
        var queue = ReplicatedCommitQueue(limit: 2)
        func pending(_ n: Int) -> ReplicatedCommitQueue.Pending {
            .init(operations: [.delete(model: "m\(n)")], completion: { _ in })
        }
        guard case .start(let first) = queue.submit(pending(0)) else { Issue.record("not started"); return }
        #expect(first.operations == [.delete(model: "m0")])
        guard case .queued = queue.submit(pending(1)), case .queued = queue.submit(pending(2)) else {
            Issue.record("not queued"); return
        }
        guard case .refused = queue.submit(pending(3)) else { Issue.record("the limit did not hold"); return }
        #expect(queue.finished()?.operations == [.delete(model: "m1")])
        #expect(queue.finished()?.operations == [.delete(model: "m2")])
        #expect(queue.finished() == nil && !queue.inFlight)
        guard case .start = queue.submit(pending(4)) else { Issue.record("an idle queue did not start"); return }
    }

    @Test func oneCommitIsAtTheLogAtATimeAndEachIsComputedAgainstTheOneBefore() {
        let log = HeldLog()
        let store = ModelStore(name: "s", replication: log)
        let answers = Answers()
        store.commit(put("a", 1)) { answers.record($0) }
        store.commit([.patch(model: "a", patch: ["m": 2])]) { answers.record($0) }
        store.commit([.set(model: "a", keyPath: "n", value: 3)]) { answers.record($0) }
        // No thread waited: all three calls returned, one commit is at the log, none answered.
        #expect(log.sent.count == 1 && log.sent[0].expectedVersion == 0 && answers.all.isEmpty)

        log.commitOldest(into: store)
        // The patch was computed only now, against version 1, where model `a` exists.
        #expect(answers.versions == [1] && log.sent.count == 1 && log.sent[0].expectedVersion == 1)
        log.commitOldest(into: store)
        log.commitOldest(into: store)
        #expect(answers.versions == [1, 2, 3] && log.sent.isEmpty)
        #expect(store.snapshot().models["a"] == ["n": 3, "m": 2])
    }

    @Test func aConflictIsComputedAgainAfterTheReplicaCaughtUp() {
        let log = HeldLog()
        let store = ModelStore(name: "s", replication: log)
        let answers = Answers()
        store.commit([.patch(model: "a", patch: ["mine": true])]) { answers.record($0) }
        // Model `a` does not exist yet: the patch fails at once and never reaches the log.
        #expect(log.sent.isEmpty)
        guard case .failure(.noSuchModel("a"))? = answers.all.first else { Issue.record("\(answers.all)"); return }

        // Another node put `a` (version 1); this node's patch, computed against version 0 before
        // the replica heard of it, conflicts.
        _ = store.applyReplicated(version: 1, committedAt: 0, changes: [ReplicatedChange(model: "a", keyPath: .whole, value: ["n": 1])])
        store.commit(put("b", 1)) { answers.record($0) }
        #expect(log.sent.first?.expectedVersion == 1)
        _ = store.applyReplicated(version: 2, committedAt: 0, changes: [ReplicatedChange(model: "c", keyPath: .whole, value: [:])])
        log.answerOldest(.conflict(2))
        // Sent again against the version that won.
        #expect(log.sent.count == 1 && log.sent[0].expectedVersion == 2 && log.sent[0].changeSet.version == 3)
        log.commitOldest(into: store)
        #expect(answers.versions == [nil, 3] && store.modelIDs.sorted() == ["a", "b", "c"])
    }

    @Test func aLogBehindTheReplicaFailsTheCommitAndTheNextStillGoes() {
        let log = HeldLog()
        let store = ModelStore(name: "s", replication: log)
        _ = store.applyReplicated(version: 1, committedAt: 0, changes: [ReplicatedChange(model: "a", keyPath: .whole, value: [:])])
        let answers = Answers()
        store.commit(put("b", 1)) { answers.record($0) }
        store.commit(put("c", 1)) { answers.record($0) }
        log.answerOldest(.conflict(0))
        guard case .failure(.unavailable)? = answers.all.first else { Issue.record("\(answers.all)"); return }
        #expect(log.sent.count == 1)
        log.answerOldest(.failed(.outcomeUnknown("lost")))
        guard case .failure(.outcomeUnknown)? = answers.all.last else { Issue.record("\(answers.all)"); return }
        #expect(answers.all.count == 2 && log.sent.isEmpty && store.version == 1)
    }

    @Test func tooManyConflictsGiveUp() {
        let log = HeldLog()
        let store = ModelStore(name: "s", replication: log)
        let answers = Answers()
        store.commit(put("b", 1)) { answers.record($0) }
        for _ in 0..<ModelStore.maxReplicatedAttempts {
            #expect(answers.all.isEmpty)
            log.answerOldest(.conflict(0))
        }
        guard case .failure(.unavailable)? = answers.all.first else { Issue.record("\(answers.all)"); return }
        #expect(log.sent.isEmpty)
    }

    /// Without the limit a stalled log would let commits pile up without end.
    @Test func commitsWaitingPastTheLimitAreRefusedAtOnce() {
        let log = HeldLog()
        let store = ModelStore(name: "s", replication: log)
        let answers = Answers()
        for n in 0...ModelStore.maxWaitingReplicatedCommits {
            store.commit(put("m\(n)", n)) { answers.record($0) }
        }
        #expect(answers.all.isEmpty)
        store.commit(put("over", 0)) { answers.record($0) }
        guard answers.all.count == 1, case .failure(.unavailable)? = answers.all.first else {
            Issue.record("\(answers.all.count) answered"); return
        }
    }

    /// Commits queued behind a stalled one, each refused by the log at once when their turn comes,
    /// are all answered, in order, without the stack growing with the queue.
    @Test func aQueueAnsweredAtOnceIsRunByALoop() {
        let log = HeldLog()
        let store = ModelStore(name: "s", replication: log)
        let answers = Answers()
        let count = ModelStore.maxWaitingReplicatedCommits
        for n in 0...count {
            store.commit(put("m\(n)", n)) { answers.record($0) }
        }
        log.immediate.withLock { $0 = .failed(.unavailable("down")) }
        log.answerOldest(.failed(.unavailable("down")))
        #expect(answers.all.count == count + 1)
        #expect(answers.all.allSatisfy { if case .failure(.unavailable) = $0 { true } else { false } })
        // Nothing is at the log now: the next commit goes straight to it.
        log.immediate.withLock { $0 = nil }
        store.commit(put("after", 0)) { answers.record($0) }
        #expect(log.sent.count == 1 && log.sent[0].expectedVersion == 0)
    }

    /// The blocking `commit` still works for callers that choose to wait (start-up).
    @Test func theBlockingCommitWaitsForTheAnswer() throws {
        let log = HeldLog()
        let store = ModelStore(name: "s", replication: log)
        let answerer = WorkerThread.start {
            // Bounded: the commit is sent before `commit` starts to wait.
            for _ in 0..<10_000 where log.sent.isEmpty { usleep(1000) }
            log.commitOldest(into: store)
        }
        let changeSet = try store.commit(put("a", 1))
        answerer.join()
        #expect(changeSet.version == 1 && store.version == 1)
    }
}
