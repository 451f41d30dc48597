import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync

/// Stores' commits through Redis: the committing thread computes and encodes the change set and
/// hands it to the loop, whose `ClusterEngine` runs the commit script; nothing waits for Redis.
///
/// Any thread. Answers come on the replica thread (`SerialWorker`), which has just applied the
/// change set: a commit computed again after a conflict, or the next one waiting, is computed
/// there and never on the loop.
final class RedisStoreReplication: StoreReplication {
    private let mailbox: Mailbox
    private let engine = PThreadLock<LoopBound<ClusterEngine>?>(nil)

    init(mailbox: Mailbox) {
        self.mailbox = mailbox
    }

    /// Loop thread, once, before anything commits.
    func attach(_ engine: ClusterEngine) {
        self.engine.withLock { $0 = LoopBound(engine, loop: engine.loop) }
    }

    func commit(
        _ changeSet: ChangeSet, models: [String: JSONValue?], expectedVersion: UInt64, epoch: String,
        completion: @escaping @Sendable (ReplicationOutcome) -> Void
    ) {
        guard let engine = engine.withLock({ $0 }) else { return completion(.failed(.unavailable("the cluster is starting"))) }
        let entry = JSONWriter.encode(ReplicatedChangeSet.encode(changeSet))
        let pairs: [(String, [UInt8])] = models.map { id, value in (id, value.map { JSONWriter.encode($0) } ?? []) }
        let store = changeSet.store
        let posted = mailbox.post {
            let engine = engine.value
            let applier = engine.applier
            LoopDeadline.run(engine.loop, seconds: engine.timeoutSeconds, timedOut: {
                ReplicationOutcome.failed(.outcomeUnknown("Redis did not answer in time; the commit may or may not be applied"))
            }, { done in
                engine.commit(store: store, expectedVersion: expectedVersion, epoch: epoch, entry: entry, models: pairs, completion: done)
            }, done: { outcome in
                // Off the loop: what the committer does next (compute again, or the next commit)
                // is a job's work. A full replica thread answers from here rather than never.
                if !applier.enqueue({ completion(outcome) }) { completion(outcome) }
            })
        }
        if posted != .accepted { completion(.failed(.unavailable("the gateway is shutting down"))) }
    }

    func createStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void) {
        onLoop(timedOut: .outcomeUnknown("Redis did not answer in time; the store may or may not be created"), completion) {
            engine, done in engine.createStore(name, completion: done)
        }
    }

    func deleteStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void) {
        onLoop(timedOut: .outcomeUnknown("Redis did not answer in time; the store may or may not be deleted"), completion) {
            engine, done in engine.deleteStore(name, completion: done)
        }
    }

    /// Runs `start` on the loop and gives its answer (nil: done) to `completion`, on the loop,
    /// within `--redis-timeout`; no thread waits meanwhile.
    private func onLoop(
        timedOut: StoreError, _ completion: @escaping @Sendable (StoreError?) -> Void,
        _ start: @escaping @Sendable (ClusterEngine, @escaping (StoreError?) -> Void) -> Void
    ) {
        guard let engine = engine.withLock({ $0 }) else { return completion(.unavailable("the cluster is starting")) }
        let posted = mailbox.post {
            let engine = engine.value
            LoopDeadline.run(engine.loop, seconds: engine.timeoutSeconds, timedOut: { timedOut }, { done in
                start(engine, done)
            }, done: completion)
        }
        if posted != .accepted { completion(.unavailable("the gateway is shutting down")) }
    }
}
