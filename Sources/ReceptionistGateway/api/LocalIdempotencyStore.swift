import OrderedCollections
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// One node's idempotency keys: a lock-guarded table in the order keys were first used, so the
/// oldest is always at the front, whether it leaves for the window or for the bound.
///
/// Any thread; every call takes the lock once, briefly.
final class LocalIdempotencyStore: IdempotencyStore {
    private struct Entry {
        let fingerprint: [UInt8]
        let since: Double
        var reply: StoredReply?
    }

    private struct ScopedKey: Hashable {
        let scope: String
        let key: IdempotencyKey
    }

    private let windowSeconds: Double
    private let maxKeys: Int
    private let now: @Sendable () -> Double
    private let table = PThreadLock<OrderedDictionary<ScopedKey, Entry>>([:])

    /// `now` is monotonic seconds (injected, so the window is tested without waiting).
    init(windowSeconds: Double, maxKeys: Int, now: @escaping @Sendable () -> Double = Clock.monotonicSeconds) {
        self.windowSeconds = windowSeconds
        self.maxKeys = max(1, maxKeys)
        self.now = now
    }

    var count: Int { table.withLock { $0.count } }

    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) -> IdempotencyClaim {
        let time = now()
        return table.withLock { table in
            // Invariant: entries are in the order they were claimed, so expiry is from the front.
            while let first = table.values.first, time - first.since >= windowSeconds {
                table.removeFirst()
            }
            let scoped = ScopedKey(scope: scope, key: key)
            if let entry = table[scoped] {
                guard entry.fingerprint == fingerprint else { return .conflict }
                return entry.reply.map { .replay($0) } ?? .inProgress
            }
            table[scoped] = Entry(fingerprint: fingerprint, since: time, reply: nil)
            while table.count > maxKeys { table.removeFirst() }
            return .claimed
        }
    }

    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply) {
        table.withLock { table in
            let scoped = ScopedKey(scope: scope, key: key)
            guard let index = table.index(forKey: scoped), table.values[index].fingerprint == fingerprint else { return }
            table.values[index].reply = reply
        }
    }

    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) {
        table.withLock { table in
            let scoped = ScopedKey(scope: scope, key: key)
            if table[scoped]?.fingerprint == fingerprint, table[scoped]?.reply == nil { table.removeValue(forKey: scoped) }
        }
    }
}
