@testable import ReceptionistDisk
import ReceptionistModel
import ReceptionistSync
import Testing

/// Idempotency keys in the data directory: claimed, answered and released as the writer stores
/// them, kept through a restart, and bounded by their window and their number.
@Suite struct DiskIdempotencyTests {
    private func record(_ key: String, since: UInt64 = Clock.microsecondsSinceEpoch()) -> DiskIdempotencyRecord {
        DiskIdempotencyRecord(scope: "scope", key: key, fingerprint: Array(key.utf8), since: since)
    }

    /// Records `changes` and waits until the writer has stored the last one; `held`, the writer
    /// takes them all in one transaction.
    private func store(_ changes: [DiskIdempotencyChange], in engine: DiskEngine, held: Bool = false) {
        if held { engine.holdWriter(true) }
        let stored = ConditionLock<StoreError??>(nil)
        let done: @Sendable (StoreError?) -> Void = { error in
            stored.withLock { $0 = .some(error) }
            stored.broadcast()
        }
        for (index, change) in changes.enumerated() {
            let queued = engine.recordIdempotency(change, completion: index == changes.count - 1 ? done : nil)
            #expect(queued)
        }
        if held { engine.holdWriter(false) }
        let outcome = stored.wait(seconds: 10, until: { $0 != nil }, then: { value, _ in value })
        #expect(outcome == .some(nil), "the last change was stored")
    }

    private func reopen(_ directory: String, _ configure: (inout DiskOptions) -> Void = { _ in }) throws -> [DiskIdempotencyRecord] {
        var options = DiskOptions(directory: directory)
        configure(&options)
        let (engine, contents) = try DiskEngine.open(options)
        engine.close()
        return contents.idempotencyKeys
    }

    /// With the write queue full, a claim is refused, but a claimed key's answer or release is
    /// still queued (its claim was queued under the limit): a request answered to its client has
    /// its answer on disk after a clean restart. Before, the answer was dropped, the key came back
    /// claimed, a retry got 409, and once the window passed the request was applied again.
    @Test func aClaimedKeysAnswerIsQueuedThoughTheQueueIsFull() throws {
        let directory = temporaryDirectory()
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory, maxQueued: 2))
        engine.holdWriter(true)
        let answered = record("answered")
        #expect(engine.recordIdempotency(.claim(answered)))
        #expect(engine.recordIdempotency(.claim(record("released"))))
        #expect(!engine.recordIdempotency(.claim(record("refused"))), "a claim waits for room")
        let stored = ConditionLock<Bool>(false)
        let reply = Array("{\"seq\":1}".utf8)
        #expect(engine.recordIdempotency(.answer(
            scope: "scope", key: "answered", fingerprint: Array("answered".utf8), since: 0, status: 201, reply: reply)))
        #expect(engine.recordIdempotency(.release(scope: "scope", key: "released", fingerprint: Array("released".utf8))) { _ in
            stored.withLock { $0 = true }
            stored.broadcast()
        })
        engine.holdWriter(false)
        #expect(stored.wait(seconds: 10, until: { $0 }, then: { value, _ in value }))
        engine.close()
        var expected = answered
        expected.status = 201
        expected.reply = reply
        #expect(try reopen(directory) == [expected])
    }

    @Test func claimedAnsweredAndReleasedKeysAreKeptAsTheyWereLeft() throws {
        let directory = temporaryDirectory()
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
        #expect(contents.idempotencyKeys.isEmpty)
        let claimed = record("claimed"), answered = record("answered"), released = record("released")
        store([
            .claim(claimed), .claim(answered), .claim(released),
            .answer(scope: "scope", key: "answered", fingerprint: Array("answered".utf8), since: 0, status: 201, reply: Array("{\"seq\":1}".utf8)),
            .release(scope: "scope", key: "released", fingerprint: Array("released".utf8)),
            // Neither a key of another request's fingerprint nor an answered one is touched.
            .answer(scope: "scope", key: "claimed", fingerprint: Array("other".utf8), since: 0, status: 201, reply: []),
            .release(scope: "scope", key: "answered", fingerprint: Array("answered".utf8)),
        ], in: engine)
        engine.close()
        var expected = answered
        expected.status = 201
        expected.reply = Array("{\"seq\":1}".utf8)
        #expect(try reopen(directory) == [claimed, expected])
    }

    /// A claim the disk did not store (its batch failed, while the request's own write in the
    /// next batch was stored) comes back with the answer: a retry after a restart gets the stored
    /// answer, never a second write.
    @Test func anAnswerWhoseClaimWasNotStoredStoresTheKeyAnswered() throws {
        let directory = temporaryDirectory()
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
        let since = Clock.microsecondsSinceEpoch()
        store([.answer(scope: "scope", key: "lost", fingerprint: Array("lost".utf8), since: since, status: 201, reply: Array("{}".utf8))],
              in: engine)
        engine.close()
        #expect(try reopen(directory) == [record("lost", since: since).answered(201, "{}")])
    }

    @Test func keysPastTheirWindowAreNotLoaded() throws {
        let directory = temporaryDirectory()
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
        let now = Clock.microsecondsSinceEpoch()
        store([.claim(record("old", since: now - 400_000_000)), .claim(record("new", since: now - 200_000_000))], in: engine)
        engine.close()
        #expect(try reopen(directory).map(\.key) == ["new"])
        #expect(try reopen(directory) { $0.idempotencyWindowSeconds = 100 }.isEmpty)
    }

    /// Five keys in one transaction with a bound of three: the table keeps the newest three, in the
    /// order they were first used, and a key claimed again counts from its new first use.
    @Test func theTableKeepsTheNewestKeysWithinItsBound() throws {
        let directory = temporaryDirectory()
        var options = DiskOptions(directory: directory)
        options.maxIdempotencyKeys = 3
        let (engine, _) = try DiskEngine.open(options)
        store(["a", "b", "c", "d", "a"].map { .claim(record($0)) }, in: engine, held: true)
        engine.close()
        #expect(try reopen(directory) { $0.maxIdempotencyKeys = 100 }.map(\.key) == ["c", "d", "a"], "pruned on disk, not only at load")
    }
}

extension DiskIdempotencyRecord {
    fileprivate func answered(_ status: Int, _ reply: String) -> DiskIdempotencyRecord {
        var record = self
        record.status = status
        record.reply = Array(reply.utf8)
        return record
    }
}
