@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistTestSupport
import ReceptionistWire

/// A hub on a `ManualContext`, and the registry of stores it serves. Create it, commit and drain
/// on the test's thread: the feeds' receptionists then deliver on that thread, as on the loop.
final class PushFixture {
    let context = ManualContext()
    let counters = PushCounters()
    let stores: StoreRegistry
    let hub: PushHub

    init(
        storeHistory: Int = 1000, topicHistory: Int = 1000, replication: (any StoreReplication)? = nil,
        presence: PresenceSettings = PresenceSettings()
    ) {
        stores = StoreRegistry(historyLimit: storeHistory, replication: replication)
        hub = PushHub(stores: stores, context: context, historyLimit: topicHistory, counters: counters, presence: presence)
    }

    @discardableResult
    func createStore(_ name: String) throws -> ModelStore {
        try stores.create(name)
    }

    @discardableResult
    func subscribe(_ sink: FakeSink, _ target: StreamTarget, since: UInt64? = nil, epoch: String? = nil) throws -> Subscription {
        try hub.subscribe(sink, to: target, since: since, epoch: epoch).get()
    }

    /// Runs the receptionists' queued deliveries. Returns how many jobs ran.
    @discardableResult
    func drain() -> Int {
        withExtendedLifetime(hub) { context.drain() }
    }
}

extension ModelStore {
    /// Commits `{"n": n}` as model `model`.
    @discardableResult
    func put(_ model: String, _ n: Int) throws -> ChangeSet {
        try commit([.put(model: model, value: ["n": .number(JSONNumber(Double(n)))])])
    }
}

/// A shared log that takes no commits: enough to make a registry's stores replicas, which the
/// tests then drive with `applyReplicated` and `resetReplica` as the cluster engine would.
final class FakeReplication: StoreReplication {
    func commit(
        _ changeSet: ChangeSet, models: [String: JSONValue?], expectedVersion: UInt64, epoch: String,
        completion: @escaping @Sendable (ReplicationOutcome) -> Void
    ) {
        completion(.failed(.unavailable("no log in this test")))
    }

    func createStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void) { completion(nil) }
    func deleteStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void) { completion(nil) }
}

/// The shared log of stores as the hub sees it: holds each lookup until the test answers it.
final class FakeStoreSource: StoreSource {
    private(set) var lookups: [(store: String, after: UInt64, through: UInt64, done: ([ChangeSet]?) -> Void)] = []

    func storeHistory(of store: String, after: UInt64, through: UInt64, done: @escaping ([ChangeSet]?) -> Void) {
        lookups.append((store, after, through, done))
    }

    /// Answers the oldest lookup with change sets `versions` of `{"n": version}` put as model `m`
    /// (nil: the log could not be read).
    func answer(_ versions: ClosedRange<UInt64>?) {
        let lookup = lookups.removeFirst()
        lookup.done(versions.map { range in
            range.map { version in
                ChangeSet(store: lookup.store, version: version, committedAtMicroseconds: 0, changes: [
                    ModelChange(model: "m", keyPath: .whole, oldValue: ["n": .number(JSONNumber(Double(version - 1)))],
                                newValue: ["n": .number(JSONNumber(Double(version)))]),
                ])
            }
        })
    }
}

/// The cluster engine as the hub sees it: records which topics it was asked to mirror, and
/// holds the history lookups until the test answers them.
final class FakeTopicSource: TopicSource {
    private(set) var watched: [String] = []
    /// Lookups asked for and not answered yet, oldest first.
    private(set) var lookups: [(topic: String, after: UInt64, through: UInt64, done: ([TopicEntry]?) -> Void)] = []

    func watchTopic(_ name: String) { watched.append(name) }

    func history(of topic: String, after: UInt64, through: UInt64, done: @escaping ([TopicEntry]?) -> Void) {
        lookups.append((topic, after, through, done))
    }

    /// Answers the oldest lookup with the log's messages `seqs` (nil: the log could not be read).
    func answer(_ seqs: [UInt64]?) {
        let lookup = lookups.removeFirst()
        lookup.done(seqs.map { $0.map { TopicEntry(seq: $0, publishedAt: 0, data: Array("\($0)".utf8)) } })
    }
}

/// A `put` of `{"n": n}` as the log carries it.
func replicatedPut(_ model: String, _ n: Int) -> [ReplicatedChange] {
    [ReplicatedChange(model: model, keyPath: .whole, value: ["n": .number(JSONNumber(Double(n)))])]
}

/// A value as the JSON text a publisher sends.
func json(_ value: JSONValue) -> [UInt8] {
    JSONWriter.encode(value)
}
