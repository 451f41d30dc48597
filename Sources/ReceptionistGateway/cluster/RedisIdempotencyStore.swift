import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// A cluster's idempotency keys, in Redis, so that a retry is recognised on any node: one entry per
/// (scope, key) expiring after the window, and one sorted set of every entry by first use for the
/// bound on their number (`ClusterScripts.idempotencyClaim`).
///
/// The blocking calls are for job threads, never the loop; the loop uses the ones with `done`.
final class RedisIdempotencyStore: IdempotencyStore {
    private let mailbox: Mailbox
    private let engine: LoopBound<ClusterEngine>
    /// How long a call waits for Redis (`--redis-timeout`).
    private let timeoutSeconds: Double
    private let windowMilliseconds: Int
    private let maxKeys: Int
    /// The name of each claim this node holds, by its entry, and when it was taken, until it is
    /// completed or given back. At most one per entry: a second claim of a held entry finds it
    /// pending. A claim kept for an unknown outcome is neither: it goes once its window is over
    /// (Redis has let the entry expire by then), pruned as the table grows.
    private let held = PThreadLock<(claims: [String: (name: String, at: UInt64)], pruneAt: Int)>(([:], 1024))

    /// Loop thread (it binds the engine's command connection).
    init(engine: ClusterEngine, windowSeconds: Double, maxKeys: Int) {
        mailbox = engine.loop.mailbox
        self.engine = LoopBound(engine, loop: engine.loop)
        timeoutSeconds = engine.timeoutSeconds
        windowMilliseconds = max(1, Int(windowSeconds * 1000))
        self.maxKeys = max(1, maxKeys)
    }

    // MARK: From a job thread: each call waits while the loop asks Redis.

    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) -> IdempotencyClaim {
        // Longer than the loop's own deadline, which answers first: a claim that lands after it
        // is given back there (a wait that gave up first could not give it back).
        LoopCall.wait(mailbox, seconds: timeoutSeconds + 1, timedOut: .unavailable("Redis did not answer in time")) {
            [self] done in claim(key, scope: scope, fingerprint: fingerprint, done: done)
        }
    }

    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply) {
        _ = LoopCall.wait(mailbox, seconds: timeoutSeconds, timedOut: false) { [self] done in
            complete(key, scope: scope, fingerprint: fingerprint, reply: reply) { done(true) }
        }
    }

    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) {
        _ = LoopCall.wait(mailbox, seconds: timeoutSeconds, timedOut: false) { [self] done in
            release(key, scope: scope, fingerprint: fingerprint) { done(true) }
        }
    }

    // MARK: On the loop: answered when Redis replies.

    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], done: @escaping (IdempotencyClaim) -> Void) {
        let engine = engine.value
        let link = Self.shard(engine, scope: scope, key: key), keys = link.keys
        let hex = Self.hex(fingerprint), entry = keys.idempotencyEntry(scope: scope, key: key.text)
        let name = RedisLife.newName() + RedisLife.newName()
        let arguments = [
            "2", entry, keys.idempotencyEntries,
            hex, String(windowMilliseconds), String(Int(Clock.microsecondsSinceEpoch() / 1000)), String(maxKeys), name,
        ]
        // A claim Redis takes after the deadline was answered (503: nothing was done under it) is
        // given back when its reply comes, and one whose reply the lost connection took, once the
        // link is back: a retry is not refused for the whole window.
        var refused = false
        LoopDeadline.run(engine.loop, seconds: timeoutSeconds, timedOut: {
            refused = true
            return .unavailable("Redis did not answer in time")
        }, { done in
            let sent = link.commands.eval(ClusterScripts.idempotencyClaim, arguments) { [self] reply in
                if refused, case .null? = reply { giveBack(entry, hex, name, on: link) {} }
                switch reply {
                case .null?:
                    if !refused { hold(entry, name) }
                    done(.claimed)
                case .string(let entry)?: done(Self.judge(entry, fingerprint: hex))
                case .error(let text)?: done(.unavailable("Redis refused the idempotency key: \(text)"))
                default:
                    // Redis may have taken the claim: it is given back, if it is still pending, on
                    // the next connection.
                    link.whenUp { [self] in giveBack(entry, hex, name, on: link) {} }
                    done(.unavailable("lost the connection to Redis before it answered"))
                }
            }
            if !sent { done(.unavailable("Redis is unreachable or not keeping up; retry later")) }
        }, done: done)
    }

    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply, done: @escaping () -> Void) {
        let link = Self.shard(engine.value, scope: scope, key: key)
        let entry = link.keys.idempotencyEntry(scope: scope, key: key.text)
        let name = settle(entry)
        var arguments: [[UInt8]] = ["1", entry, Self.hex(fingerprint), name].map { Array($0.utf8) }
        arguments.append(Array("\(reply.status.code):".utf8) + reply.body)
        run(ClusterScripts.idempotencyComplete, on: link, arguments, done)
    }

    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], done: @escaping () -> Void) {
        let link = Self.shard(engine.value, scope: scope, key: key)
        let entry = link.keys.idempotencyEntry(scope: scope, key: key.text)
        let name = settle(entry)
        giveBack(entry, Self.hex(fingerprint), name, on: link, done)
    }

    private func hold(_ entry: String, _ name: String) {
        let now = Clock.microsecondsSinceEpoch() / 1000
        let window = UInt64(windowMilliseconds)
        held.withLock { held in
            held.claims[entry] = (name, now)
            guard held.claims.count >= held.pruneAt else { return }
            held.claims = held.claims.filter { now &- $0.value.at < window }
            held.pruneAt = max(1024, held.claims.count * 2)
        }
    }

    /// The name of the claim this node holds of `entry`, which it settles now ("" if none).
    private func settle(_ entry: String) -> String {
        held.withLock { $0.claims.removeValue(forKey: entry)?.name } ?? ""
    }

    /// Forgets the claim named `name` of `entry`, if it is still pending.
    private func giveBack(_ entry: String, _ fingerprint: String, _ name: String, on link: RedisLink, _ done: @escaping () -> Void) {
        run(ClusterScripts.idempotencyRelease, on: link, ["1", entry, fingerprint, name].map { Array($0.utf8) }, done)
    }

    /// Sends a script; `done` once Redis has run it, at once if it could not be sent, or when
    /// Redis takes longer than the time-out.
    private func run(_ script: RedisScript, on link: RedisLink, _ arguments: [[UInt8]], _ done: @escaping () -> Void) {
        LoopDeadline.run(link.commands.loop, seconds: timeoutSeconds, timedOut: {}, { done in
            if !link.commands.eval(script, arguments, reply: { _ in done(()) }) { done(()) }
        }, done: { done() })
    }

    /// The server that keeps a key: spread like topics and stores, by the scope and key. The
    /// bound on how many keys are kept (`--idempotency-keys`) then holds per server.
    private static func shard(_ engine: ClusterEngine, scope: String, key: IdempotencyKey) -> RedisLink {
        engine.shard(scope + ":" + key.text)
    }

    /// What an existing entry means for a request with `fingerprint`.
    static func judge(_ entry: [UInt8], fingerprint: String) -> IdempotencyClaim {
        let parts = entry.split(separator: UInt8(ascii: ":"), maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count >= 2, String(decoding: parts[1], as: UTF8.self) == fingerprint else { return .conflict }
        guard parts[0].elementsEqual("d".utf8), parts.count == 4,
              let code = Int(String(decoding: parts[2], as: UTF8.self))
        else { return .inProgress }
        let status = [HTTPStatus.ok, .created, .accepted, .noContent].first { $0.code == code } ?? HTTPStatus(code: code, reason: "OK")
        return .replay(StoredReply(status: status, body: Array(parts[3])))
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
