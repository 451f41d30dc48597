import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync

/// Stores' commits through Redis: the job thread encodes the change set, then waits while the
/// loop's `ClusterEngine` runs the commit script.
///
/// Any thread except the loop's (it blocks until the loop answers).
final class RedisStoreReplication: StoreReplication {
    private let mailbox: Mailbox
    /// How long a commit waits for Redis (`--redis-timeout`).
    private let timeoutSeconds: Double
    private let engine = PThreadLock<LoopBound<ClusterEngine>?>(nil)

    init(mailbox: Mailbox, timeoutSeconds: Double) {
        self.mailbox = mailbox
        self.timeoutSeconds = timeoutSeconds
    }

    /// Loop thread, once, before anything commits.
    func attach(_ engine: ClusterEngine) {
        self.engine.withLock { $0 = LoopBound(engine, loop: engine.loop) }
    }

    func commit(_ changeSet: ChangeSet, models: [String: JSONValue?], expectedVersion: UInt64) -> ReplicationOutcome {
        guard let engine = engine.withLock({ $0 }) else { return .failed(.unavailable("the cluster is starting")) }
        let entry = JSONWriter.encode(ReplicatedChangeSet.encode(changeSet))
        let pairs: [(String, [UInt8])] = models.map { id, value in (id, value.map { JSONWriter.encode($0) } ?? []) }
        let store = changeSet.store
        return LoopCall.wait(mailbox, seconds: timeoutSeconds, timedOut: .failed(.outcomeUnknown("Redis did not answer in time"))) { done in
            engine.value.commit(store: store, expectedVersion: expectedVersion, entry: entry, models: pairs, completion: done)
        }
    }

    func createStore(_ name: String) throws(StoreError) {
        guard let engine = engine.withLock({ $0 }) else { throw .unavailable("the cluster is starting") }
        let outcome: StoreError? = LoopCall.wait(
            mailbox, seconds: timeoutSeconds, timedOut: .unavailable("Redis did not answer in time")
        ) { done in
            engine.value.createStore(name, completion: done)
        }
        if let outcome { throw outcome }
    }
}
