import ReceptionistJSON
import ReceptionistSync

/// The gateway's stores by name. Any thread.
public final class StoreRegistry: Sendable {
    private let stores = PThreadLock<[String: ModelStore]>([:])
    public let historyLimit: Int
    /// How many change sets the store of a name keeps (its namespace's, or `historyLimit`).
    public let historyOf: @Sendable (String) -> Int
    /// The most bytes of change sets each store keeps in memory (`--history-bytes`).
    public let historyBytes: Int
    /// When set, every store is a replica of this shared log, and creating one registers it there.
    public let replication: (any StoreReplication)?
    /// When set, every store is durable: kept by this journal (the disk engine).
    public let journal: (any StoreJournal)?
    /// The most stores this registry holds for a creation here to be taken (`--max-stores`); in a
    /// cluster it holds every node's. Stores put back from disk, or made on another node, are
    /// kept whatever their number.
    public let maxStores: Int

    public init(
        historyLimit: Int = 1000, replication: (any StoreReplication)? = nil, journal: (any StoreJournal)? = nil,
        historyOf: (@Sendable (String) -> Int)? = nil, historyBytes: Int = .max, maxStores: Int = .max
    ) {
        self.maxStores = maxStores
        self.historyLimit = historyLimit
        self.historyBytes = historyBytes
        self.historyOf = historyOf ?? { _ in historyLimit }
        self.replication = replication
        self.journal = journal
    }

    /// Creates the store `name`. With a shared log, the calling thread waits for the log's answer:
    /// for work that may wait (the demo's seeding); a request uses `create(_:completion:)`.
    @discardableResult
    public func create(_ name: String) throws(StoreError) -> ModelStore {
        guard Self.isValidName(name) else { throw .invalidStoreName(name) }
        if let full = fullness(creating: name) { throw full }
        if let replication {
            try Self.waitFor { replication.createStore(name, completion: $0) }
            return replica(name)
        }
        return try createHere(name)
    }

    /// Creates the store `name`; `completion` runs once, on any thread. With a shared log it runs
    /// when the log answers, and no thread waits meanwhile; otherwise before this returns.
    public func create(_ name: String, completion: @escaping @Sendable (Result<ModelStore, StoreError>) -> Void) {
        guard Self.isValidName(name) else { return completion(.failure(.invalidStoreName(name))) }
        if let full = fullness(creating: name) { return completion(.failure(full)) }
        guard let replication else {
            return completion(Result { () throws(StoreError) in try createHere(name) })
        }
        replication.createStore(name) { [self] error in
            completion(error.map { .failure($0) } ?? .success(replica(name)))
        }
    }

    /// Deletes the store `name`; `completion` runs once, on any thread, with nil when deleted.
    /// With a shared log it runs when the log answers, and no thread waits meanwhile; otherwise
    /// before this returns.
    public func delete(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void) {
        guard let replication else {
            do throws(StoreError) {
                try delete(name)
                return completion(nil)
            } catch {
                return completion(error)
            }
        }
        replication.deleteStore(name, completion: completion)
    }

    /// Calls `start` with a completion and waits for it (a shared log answers every call, within
    /// its own time-out).
    private static func waitFor(_ start: (@escaping @Sendable (StoreError?) -> Void) -> Void) throws(StoreError) {
        let answer = ConditionLock<StoreError??>(nil)
        start { error in
            answer.withLock { $0 = .some(error) }
            answer.broadcast()
        }
        let error: StoreError? = answer.wait(until: { $0 != nil }, then: { $0 ?? nil })
        if let error { throw error }
    }

    /// Why `name` cannot be made now for want of room, if so: the registry holds `maxStores`,
    /// and `name` is not one of them (a store that exists is answered as such, `409`).
    private func fullness(creating name: String) -> StoreError? {
        let (count, exists) = stores.withLock { ($0.count, $0[name] != nil) }
        return exists ? nil : fullness(count)
    }

    private func fullness(_ count: Int) -> StoreError? {
        count < maxStores ? nil : .overCapacity("the gateway keeps \(maxStores) stores, its limit (--max-stores): delete one first")
    }

    private func createHere(_ name: String) throws(StoreError) -> ModelStore {
        let store = ModelStore(name: name, historyLimit: historyOf(name), historyBytes: historyBytes, journal: journal)
        let created: StoreError? = stores.withLock { stores in
            guard stores[name] == nil else { return .storeExists(name) }
            // Counted again under the lock: two creations at once may not both take the last place.
            guard stores.count < maxStores else { return fullness(stores.count) }
            stores[name] = store
            return nil
        }
        if let created { throw created }
        if let journal {
            do throws(StoreError) {
                try journal.createStore(store)
            } catch .outcomeUnknown(let reason) {
                // The disk did not answer in time, but the creation waits in its queue and will
                // be written: the store stays, as the disk will have it (a retry finds it: 409).
                throw .outcomeUnknown(reason + "; the store may or may not be created")
            } catch {
                stores.withLock { if $0[name] === store { $0[name] = nil } }
                throw error
            }
        }
        return store
    }

    /// A store as the journal kept it, at start (before anyone observes it).
    @discardableResult
    public func restore(
        _ name: String, epoch: String, version: UInt64, models: [(id: String, value: JSONValue, tag: UInt64)], history: [ChangeSet]
    ) -> ModelStore {
        let store = ModelStore(name: name, historyLimit: historyOf(name), historyBytes: historyBytes, epoch: epoch, journal: journal)
        store.restore(models: models, version: version, history: history)
        stores.withLock { $0[name] = store }
        return store
    }

    /// Deletes the store `name` and, journaled, everything kept of it. A store made again under
    /// the name starts at version 0 in a new epoch. With a shared log, the log deletes it, and
    /// each node drops its replica as it hears of it (`dropReplica`).
    public func delete(_ name: String) throws(StoreError) {
        if let replication { return try Self.waitFor { replication.deleteStore(name, completion: $0) } }
        guard let store = stores.withLock({ $0.removeValue(forKey: name) }) else { throw .noSuchStore(name) }
        guard let journal else { return store.markDeleted() }
        do throws(StoreError) {
            try journal.deleteStore(name)
        } catch .outcomeUnknown(let reason) {
            // The disk did not answer in time, but the deletion waits in its queue and will be
            // written: the store is gone here too, as it will be on disk. Put back, it was read
            // as there while its writes were refused, and gone after a restart.
            store.markDeleted()
            throw .outcomeUnknown(reason + "; the store may or may not be deleted")
        } catch {
            // Refused (the disk is full, say): nothing was deleted, so the store stays as it was.
            stores.withLock { if $0[name] == nil { $0[name] = store } }
            throw error
        }
        store.markDeleted()
    }

    /// Drops this node's replica of `name` if it is of the store deleted in `epoch` (nil: any),
    /// not one made again since under the name; returns whether it did.
    @discardableResult
    public func dropReplica(_ name: String, epoch: String?) -> Bool {
        stores.withLock { stores in
            guard let store = stores[name], epoch == nil || store.epoch == epoch else { return false }
            stores[name] = nil
            return true
        }
    }

    /// The replica named `name`, created empty at version 0 if this node has not seen it yet: in
    /// `epoch` where it is known (this node has just made the store), else as below.
    @discardableResult
    public func replica(_ name: String, epoch: String? = nil) -> ModelStore {
        // Every node's replica of one cluster store must name the same epoch, so that a client
        // resumes on any node: until the first snapshot brings the epoch kept in Redis (which
        // `resetReplica` takes), it is one derived from the name, the same on every node.
        let fresh = ModelStore(
            name: name, historyLimit: historyOf(name), historyBytes: historyBytes, replication: replication,
            epoch: epoch ?? Self.clusterEpoch(name))
        return stores.withLock { stores in
            if let existing = stores[name] { return existing }
            stores[name] = fresh
            return fresh
        }
    }

    public func store(_ name: String) -> ModelStore? {
        stores.withLock { $0[name] }
    }

    /// Every store, sorted by name (outside the lock: other threads' lookups do not wait for
    /// the sort).
    public var all: [ModelStore] {
        stores.withLock { Array($0.values) }.sorted { $0.name < $1.name }
    }

    /// How many stores there are.
    public var count: Int { stores.withLock { $0.count } }

    /// 1 to 64 of `A-Z a-z 0-9 _ . -`, but not `.` or `..`: a URL's path cannot name those (a
    /// client resolves them away), so a store or topic so named could be made but never reached.
    public static func isValidName(_ name: String) -> Bool {
        let count = name.utf8.count
        guard (1...64).contains(count), count > 2 || name != "." && name != ".." else { return false }
        // Read in place: every publish checks its topic's name, and the UTF-8 view's iterator
        // cost it 20 instructions a byte.
        var name = name
        return name.withUTF8 { bytes in
            bytes.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                     UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"):
                    true
                default:
                    false
                }
            }
        }
    }

    /// FNV-1a of the name, in hex: the same on every node.
    static func clusterEpoch(_ name: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
