import ReceptionistWire

/// What a publish's first attempt answered, kept for its retries.
struct StoredReply: Sendable, Equatable {
    let status: HTTPStatus
    let body: [UInt8]
}

/// What claiming an idempotency key found.
enum IdempotencyClaim: Sendable, Equatable {
    /// The key is new (or its window passed): this request goes ahead, then completes or releases it.
    case claimed
    /// The same request was answered already: answer it again, publish nothing.
    case replay(StoredReply)
    /// The key was used for a different request (another target or body).
    case conflict
    /// The same request is still being answered (a retry that overtook its first attempt).
    case inProgress
    /// The shared table could not be asked (the cluster's Redis is down).
    case unavailable(String)
}

/// Idempotency keys, remembered per scope (an API key) for `--idempotency-window`, at most
/// `--idempotency-keys` of them, the oldest forgotten first. In memory for one node, in Redis
/// for a cluster.
///
/// The blocking three may be called on any thread but the loop's (the Redis store waits for the
/// loop); the three with `done` are the loop's own, and answer on it without blocking.
protocol IdempotencyStore: Sendable {
    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) -> IdempotencyClaim
    /// The claimed request was answered with `reply`, which its retries get.
    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply)
    /// The claimed request failed: forget the key, so that a retry may try again.
    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8])

    /// Loop thread: `claim`, answered through `done` on the loop.
    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], done: @escaping (IdempotencyClaim) -> Void)
    /// Loop thread: `complete`, then `done` once it is recorded (or could not be).
    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply, done: @escaping () -> Void)
    /// Loop thread: `release`, then `done`.
    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], done: @escaping () -> Void)
}

/// A store that never waits (the memory table) answers the loop at once.
extension IdempotencyStore {
    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], done: @escaping (IdempotencyClaim) -> Void) {
        done(claim(key, scope: scope, fingerprint: fingerprint))
    }

    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply, done: @escaping () -> Void) {
        complete(key, scope: scope, fingerprint: fingerprint, reply: reply)
        done()
    }

    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], done: @escaping () -> Void) {
        release(key, scope: scope, fingerprint: fingerprint)
        done()
    }
}
