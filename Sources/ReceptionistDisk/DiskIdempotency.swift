import ReceptionistModel

/// An idempotency key as the data directory keeps it: claimed when its first request went ahead,
/// answered once that request was (with the reply its retries get), gone once released.
public struct DiskIdempotencyRecord: Sendable, Equatable {
    public let scope: String
    public let key: String
    public let fingerprint: [UInt8]
    /// Microseconds since the epoch of the key's first use (its window runs from it).
    public let since: UInt64
    /// The first attempt's answer, nil while it had none: a key claimed by a request whose
    /// answer was never stored (the process stopped meanwhile), whose outcome is unknown.
    public var status: Int?
    public var reply: [UInt8]?

    public init(scope: String, key: String, fingerprint: [UInt8], since: UInt64, status: Int? = nil, reply: [UInt8]? = nil) {
        self.scope = scope
        self.key = key
        self.fingerprint = fingerprint
        self.since = since
        self.status = status
        self.reply = reply
    }
}

/// A change to the stored keys.
public enum DiskIdempotencyChange: Sendable, Equatable {
    /// A key's first request goes ahead: queued before that request's own writes, so it is stored
    /// with them or before them, never after.
    case claim(DiskIdempotencyRecord)
    /// The claimed key's request was answered with `status` and `reply`. A claim the disk failed
    /// to store (a batch refused while the request's own write, in the next, was stored) is
    /// stored with the answer, its window running from `since`: a stored write has its key.
    case answer(scope: String, key: String, fingerprint: [UInt8], since: UInt64, status: Int, reply: [UInt8])
    /// The claimed key's request failed with nothing written: the key is free again.
    case release(scope: String, key: String, fingerprint: [UInt8])
}

struct DiskIdempotencyWrite: Sendable {
    let change: DiskIdempotencyChange
    /// Runs on the writer thread once the change is stored (nil) or not.
    let completion: (@Sendable (StoreError?) -> Void)?
}

/// The `idempotency_keys` table: the writer's statements, the pruning that bounds it, and the load
/// at start. Rows are in first-use order by rowid (a claim inserts; an answer updates in place, or
/// inserts a claim the disk lost).
///
/// Writer thread only, once made.
final class DiskIdempotencyTable {
    static let schema = """
        CREATE TABLE IF NOT EXISTS idempotency_keys(scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint BLOB NOT NULL,
            since INTEGER NOT NULL, status INTEGER, reply BLOB, PRIMARY KEY(scope, key));
        """

    private let claim, answer, release, pruneOld, pruneMany: SQLiteStatement
    private let windowMicroseconds: UInt64
    private let maxKeys: Int
    private var lastPrune: UInt64 = 0

    init(db: SQLiteDatabase, options: DiskOptions) throws(SQLiteError) {
        claim = try db.prepare(
            "INSERT OR REPLACE INTO idempotency_keys(scope, key, fingerprint, since, status, reply) VALUES (?1, ?2, ?3, ?4, NULL, NULL)")
        answer = try db.prepare(
            "INSERT INTO idempotency_keys(scope, key, fingerprint, since, status, reply) VALUES (?1, ?2, ?3, ?6, ?4, ?5) "
                + "ON CONFLICT(scope, key) DO UPDATE SET status = excluded.status, reply = excluded.reply "
                + "WHERE idempotency_keys.fingerprint = excluded.fingerprint AND idempotency_keys.status IS NULL")
        release = try db.prepare(
            "DELETE FROM idempotency_keys WHERE scope = ?1 AND key = ?2 AND fingerprint = ?3 AND status IS NULL")
        pruneOld = try db.prepare("DELETE FROM idempotency_keys WHERE since < ?1")
        pruneMany = try db.prepare(
            "DELETE FROM idempotency_keys WHERE rowid < (SELECT rowid FROM idempotency_keys ORDER BY rowid DESC LIMIT 1 OFFSET ?1)")
        windowMicroseconds = UInt64(options.idempotencyWindowSeconds * 1_000_000)
        maxKeys = options.maxIdempotencyKeys
    }

    func apply(_ change: DiskIdempotencyChange) throws(SQLiteError) {
        switch change {
        case .claim(let record):
            claim.bind(1, record.scope)
            claim.bind(2, record.key)
            claim.bind(3, blob: record.fingerprint)
            claim.bind(4, Int64(record.since))
            try claim.run()
        case .answer(let scope, let key, let fingerprint, let since, let status, let reply):
            answer.bind(1, scope)
            answer.bind(2, key)
            answer.bind(3, blob: fingerprint)
            answer.bind(4, Int64(status))
            answer.bind(5, blob: reply)
            answer.bind(6, Int64(since))
            try answer.run()
        case .release(let scope, let key, let fingerprint):
            release.bind(1, scope)
            release.bind(2, key)
            release.bind(3, blob: fingerprint)
            try release.run()
        }
    }

    /// Deletes the keys past their window, and all but the newest `maxKeys`: at most once a
    /// second, in the transaction of a batch that wrote keys.
    func pruneIfDue(now: UInt64) throws(SQLiteError) {
        guard now >= lastPrune + 1_000_000 else { return }
        lastPrune = now
        pruneOld.bind(1, Int64(now > windowMicroseconds ? now - windowMicroseconds : 0))
        try pruneOld.run()
        pruneMany.bind(1, Int64(maxKeys - 1))
        try pruneMany.run()
    }

    /// The keys still in their window at `now`, the newest `maxKeys` of them, oldest first.
    static func load(_ db: SQLiteDatabase, options: DiskOptions, now: UInt64) throws -> [DiskIdempotencyRecord] {
        let window = UInt64(options.idempotencyWindowSeconds * 1_000_000)
        let rows = try db.prepare("""
            SELECT scope, key, fingerprint, since, status, reply FROM
                (SELECT rowid, * FROM idempotency_keys WHERE since >= ?1 ORDER BY rowid DESC LIMIT ?2) ORDER BY rowid
            """)
        rows.bind(1, Int64(now > window ? now - window : 0))
        rows.bind(2, Int64(options.maxIdempotencyKeys))
        var records: [DiskIdempotencyRecord] = []
        while try rows.step() {
            let answered = !rows.isNull(4)
            records.append(DiskIdempotencyRecord(
                scope: rows.text(0), key: rows.text(1), fingerprint: rows.blob(2), since: UInt64(clamping: rows.int64(3)),
                status: answered ? Int(rows.int64(4)) : nil, reply: answered ? rows.blob(5) : nil))
        }
        return records
    }
}
