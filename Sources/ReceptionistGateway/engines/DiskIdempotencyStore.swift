import ReceptionistDisk
import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// The `disk` engine's idempotency keys: the memory table answers, and the data directory keeps
/// every key through a restart or a crash, so a retry sent after one is answered from the first
/// attempt, never applied again.
///
/// Invariant: a key's claim is queued to the disk's writer before its request's own writes, and
/// the writer stores in queue order, so a write on disk always has its key on disk too. Its
/// answer is stored before the request is answered: a client that was told the outcome and
/// retries anyway after a crash is answered from the key. A key whose request was under way when
/// the process stopped comes back claimed without an answer (the outcome unknown): its retries get
/// 409 until the window passes, as a cluster's key whose Redis answer was lost.
///
/// Any thread, as `LocalIdempotencyStore`; the loop's calls never wait for the disk.
final class DiskIdempotencyStore: IdempotencyStore {
    private let table: LocalIdempotencyStore
    private let disk: DiskEngine
    private let mailbox: Mailbox

    /// `kept`: the keys the data directory held at start, oldest first.
    init(table: LocalIdempotencyStore, disk: DiskEngine, kept: [DiskIdempotencyRecord], mailbox: Mailbox) {
        self.table = table
        self.disk = disk
        self.mailbox = mailbox
        let now = Clock.microsecondsSinceEpoch()
        for record in kept {
            guard let key = IdempotencyKey(header: record.key) else { continue }
            let reply = record.status.map { StoredReply(status: Self.status($0), body: record.reply ?? []) }
            let age = Double(now > record.since ? now - record.since : 0) / 1_000_000
            table.restore(key, scope: record.scope, fingerprint: record.fingerprint, age: age, reply: reply)
        }
    }

    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) -> IdempotencyClaim {
        let claim = table.claim(key, scope: scope, fingerprint: fingerprint)
        guard case .claimed = claim else { return claim }
        let record = DiskIdempotencyRecord(scope: scope, key: key.text, fingerprint: fingerprint, since: Clock.microsecondsSinceEpoch())
        guard disk.recordIdempotency(.claim(record)) else {
            table.release(key, scope: scope, fingerprint: fingerprint)
            return .unavailable("the disk's write queue is full (\(disk.options.maxQueued) writes); retry")
        }
        return claim
    }

    /// Waits until the answer is stored (or the disk failed it, or 30 s passed): the request's
    /// answer follows. Not stored, only a crash loses it: the key comes back claimed, and a retry
    /// gets 409.
    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply) {
        table.complete(key, scope: scope, fingerprint: fingerprint, reply: reply)
        _ = disk.recordIdempotencyAndWait(Self.answer(key, scope: scope, fingerprint: fingerprint, reply: reply), seconds: 30)
    }

    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8]) {
        table.release(key, scope: scope, fingerprint: fingerprint)
        // Not waited for: lost in a crash, the key comes back claimed, and a retry gets 409 until
        // the window passes; never a second write.
        _ = disk.recordIdempotency(.release(scope: scope, key: key.text, fingerprint: fingerprint))
    }

    /// The claim never waits: queued, it is stored before anything the request writes next.
    func claim(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], done: @escaping (IdempotencyClaim) -> Void) {
        done(claim(key, scope: scope, fingerprint: fingerprint))
    }

    /// `done` runs on the loop once the answer is stored (or the disk failed it).
    func complete(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply, done: @escaping () -> Void) {
        // Made on the loop, opened there again.
        let finished = ThreadBound(done)
        let mailbox = self.mailbox
        table.complete(key, scope: scope, fingerprint: fingerprint, reply: reply)
        let change = Self.answer(key, scope: scope, fingerprint: fingerprint, reply: reply)
        let queued = disk.recordIdempotency(change) { _ in _ = mailbox.post { finished.value() } }
        if !queued { done() }
    }

    func release(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], done: @escaping () -> Void) {
        release(key, scope: scope, fingerprint: fingerprint)
        done()
    }

    /// A stored answer's status (only successes are stored).
    private static func status(_ code: Int) -> HTTPStatus {
        [HTTPStatus.ok, .created, .accepted, .noContent].first { $0.code == code } ?? HTTPStatus(code: code, reason: "OK")
    }

    /// The change that stores a claimed key's answer.
    private static func answer(_ key: IdempotencyKey, scope: String, fingerprint: [UInt8], reply: StoredReply) -> DiskIdempotencyChange {
        .answer(scope: scope, key: key.text, fingerprint: fingerprint, since: Clock.microsecondsSinceEpoch(), status: reply.status.code, reply: reply.body)
    }
}
