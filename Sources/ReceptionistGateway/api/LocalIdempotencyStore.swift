import DequeModule
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// One node's idempotency keys: a lock-guarded table, with the keys in the order they were first
/// used beside it, so the oldest is always at the front, whether it leaves for the window or for
/// the bound. Every operation is O(1) (amortised), so the loop may claim keys too.
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

    private struct Table {
        var entries: [ScopedKey: Entry] = [:]
        /// Keys by first use, oldest first. A released key stays here until it reaches the front,
        /// where it is dropped unless its entry is still the one it named (same `since`).
        var order: Deque<(key: ScopedKey, since: Double)> = []
    }

    private let windowSeconds: Double
    private let maxKeys: Int
    private let now: @Sendable () -> Double
    private let table = PThreadLock(Table())

    /// `now` is monotonic seconds (injected, so the window is tested without waiting).
    init(windowSeconds: Double, maxKeys: Int, now: @escaping @Sendable () -> Double = Clock.monotonicSeconds) {
        self.windowSeconds = windowSeconds
        self.maxKeys = max(1, maxKeys)
        self.now = now
    }

    var count: Int { table.withLock { $0.entries.count } }

    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) -> IdempotencyClaim {
        let time = now()
        return table.withLock { table in
            // Invariant: `order` is by first use, so expiry and the bound both take from the front.
            // Released keys leave stale records behind; past twice the bound the oldest go anyway.
            while let first = table.order.first,
                  time - first.since >= windowSeconds || table.entries[first.key]?.since != first.since
                    || table.order.count > 2 * maxKeys {
                table.order.removeFirst()
                if table.entries[first.key]?.since == first.since { table.entries.removeValue(forKey: first.key) }
            }
            let scoped = ScopedKey(scope: scope, key: key)
            if let entry = table.entries[scoped] {
                guard entry.fingerprint == fingerprint else { return .conflict }
                return entry.reply.map { .replay($0) } ?? .inProgress
            }
            table.entries[scoped] = Entry(fingerprint: fingerprint, since: time, reply: nil)
            table.order.append((scoped, time))
            while table.entries.count > maxKeys, let oldest = table.order.popFirst() {
                if table.entries[oldest.key]?.since == oldest.since { table.entries.removeValue(forKey: oldest.key) }
            }
            return .claimed
        }
    }

    /// A key kept from an earlier run, put back at start: first used `age` seconds ago, answered
    /// with `reply` (nil: its request's outcome is unknown, so it stays claimed and its retries get
    /// 409 until the window passes). Oldest first; past the window or the bound, it is not kept.
    func restore(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], age: Double, reply: StoredReply?) {
        guard age < windowSeconds else { return }
        let since = now() - max(0, age)
        table.withLock { table in
            let scoped = ScopedKey(scope: scope, key: key)
            table.entries[scoped] = Entry(fingerprint: fingerprint, since: since, reply: reply)
            table.order.append((scoped, since))
            while table.entries.count > maxKeys, let oldest = table.order.popFirst() {
                if table.entries[oldest.key]?.since == oldest.since { table.entries.removeValue(forKey: oldest.key) }
            }
        }
    }

    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply) {
        table.withLock { table in
            let scoped = ScopedKey(scope: scope, key: key)
            guard table.entries[scoped]?.fingerprint == fingerprint else { return }
            table.entries[scoped]?.reply = reply
        }
    }

    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) {
        table.withLock { table in
            let scoped = ScopedKey(scope: scope, key: key)
            if let entry = table.entries[scoped], entry.fingerprint == fingerprint, entry.reply == nil {
                table.entries.removeValue(forKey: scoped)
            }
        }
    }
}
