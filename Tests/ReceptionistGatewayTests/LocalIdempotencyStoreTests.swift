@testable import ReceptionistGateway
import ReceptionistModel
import ReceptionistWire
import Synchronization
import Testing

@Suite struct LocalIdempotencyStoreTests {
    /// A clock the test moves by hand.
    final class ManualClock: Sendable {
        private let seconds = Mutex(0.0)
        func advance(_ by: Double) { seconds.withLock { $0 += by } }
        var now: Double { seconds.withLock { $0 } }
    }

    private func key(_ text: String) -> IdempotencyKey { IdempotencyKey(header: text)! }
    private let first: [UInt8] = [1], second: [UInt8] = [2]
    private let created = StoredReply(status: .created, body: Array(#"{"seq":1}"#.utf8))

    @Test func aCompletedKeyIsReplayedAndAnotherRequestUnderItIsAConflict() {
        let store = LocalIdempotencyStore(windowSeconds: 300, maxKeys: 10)
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .claimed)
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .inProgress, "the first attempt is not answered yet")
        store.complete(key("k"), scope: "", fingerprint: first, reply: created)
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .replay(created))
        #expect(store.claim(key("k"), scope: "", fingerprint: second) == .conflict)
    }

    /// Keys put back at start, oldest first: an answered one is replayed, one without an answer (its outcome
    /// unknown) is in progress until its window passes, counted from its first use; one past its
    /// window is not kept.
    @Test func restoredKeysKeepTheirAnswerAndTheirAge() {
        let clock = ManualClock()
        clock.advance(1000)
        let store = LocalIdempotencyStore(windowSeconds: 300, maxKeys: 10, now: { clock.now })
        store.restore(key("old"), scope: "", fingerprint: first, age: 301, reply: created)
        store.restore(key("unknown"), scope: "", fingerprint: first, age: 200, reply: nil)
        store.restore(key("answered"), scope: "", fingerprint: first, age: 10, reply: created)
        #expect(store.count == 2)
        #expect(store.claim(key("answered"), scope: "", fingerprint: first) == .replay(created))
        #expect(store.claim(key("unknown"), scope: "", fingerprint: first) == .inProgress)
        #expect(store.claim(key("unknown"), scope: "", fingerprint: second) == .conflict)
        clock.advance(100)
        #expect(store.claim(key("unknown"), scope: "", fingerprint: first) == .claimed, "its window ran from its first use")
        #expect(store.claim(key("old"), scope: "", fingerprint: second) == .claimed)
    }

    @Test func scopesAreApart() {
        let store = LocalIdempotencyStore(windowSeconds: 300, maxKeys: 10)
        #expect(store.claim(key("k"), scope: "a", fingerprint: first) == .claimed)
        #expect(store.claim(key("k"), scope: "b", fingerprint: second) == .claimed)
    }

    @Test func aReleasedKeyMayBeTriedAgain() {
        let store = LocalIdempotencyStore(windowSeconds: 300, maxKeys: 10)
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .claimed)
        store.release(key("k"), scope: "", fingerprint: first)
        #expect(store.claim(key("k"), scope: "", fingerprint: second) == .claimed)
        store.complete(key("k"), scope: "", fingerprint: second, reply: created)
        store.release(key("k"), scope: "", fingerprint: second)
        #expect(store.claim(key("k"), scope: "", fingerprint: second) == .replay(created), "a completed key is not released")
    }

    @Test func aKeyIsForgottenWhenItsWindowHasPassed() {
        let clock = ManualClock()
        let store = LocalIdempotencyStore(windowSeconds: 5, maxKeys: 10, now: { clock.now })
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .claimed)
        store.complete(key("k"), scope: "", fingerprint: first, reply: created)
        clock.advance(4.999)
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .replay(created))
        clock.advance(0.001)
        #expect(store.claim(key("k"), scope: "", fingerprint: second) == .claimed)
        #expect(store.count == 1)
    }

    /// The bound: without it the table grows with every key a publisher ever sent.
    @Test func pastTheBoundTheOldestKeysAreForgottenFirst() {
        let store = LocalIdempotencyStore(windowSeconds: 300, maxKeys: 3)
        for name in ["k1", "k2", "k3", "k4", "k5"] {
            #expect(store.claim(key(name), scope: "", fingerprint: first) == .claimed)
            store.complete(key(name), scope: "", fingerprint: first, reply: created)
        }
        #expect(store.count == 3)
        #expect(store.claim(key("k5"), scope: "", fingerprint: first) == .replay(created))
        #expect(store.claim(key("k3"), scope: "", fingerprint: first) == .replay(created))
        #expect(store.claim(key("k1"), scope: "", fingerprint: first) == .claimed, "k1 was the oldest")
        #expect(store.count == 3)
    }

    @Test func aRedisEntryIsJudgedLikeALocalOne() {
        let hex = RedisIdempotencyStore.hex([0xAB, 0x01])
        #expect(hex == "ab01")
        #expect(RedisIdempotencyStore.judge(Array("p:ab01".utf8), fingerprint: hex) == .inProgress)
        #expect(RedisIdempotencyStore.judge(Array("p:ffff".utf8), fingerprint: hex) == .conflict)
        #expect(RedisIdempotencyStore.judge(Array(#"d:ab01:201:{"a":"x:y"}"#.utf8), fingerprint: hex)
            == .replay(StoredReply(status: .created, body: Array(#"{"a":"x:y"}"#.utf8))))
        #expect(RedisIdempotencyStore.judge(Array("d:0000:200:{}".utf8), fingerprint: hex) == .conflict)
    }

    @Test func aKeyReleasedAndClaimedAgainIsNotDroppedByItsEarlierRecord() {
        let clock = ManualClock()
        let store = LocalIdempotencyStore(windowSeconds: 5, maxKeys: 10, now: { clock.now })
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .claimed)
        store.release(key("k"), scope: "", fingerprint: first)
        clock.advance(3)
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .claimed)
        store.complete(key("k"), scope: "", fingerprint: first, reply: created)
        clock.advance(3)  // the first claim's window has passed, the second's has not
        #expect(store.claim(key("k"), scope: "", fingerprint: first) == .replay(created))
    }

    /// A write whose outcome is unknown (Redis took it, its answer was lost) keeps its key, so a
    /// retry cannot write twice; a failure known to have written nothing frees it.
    @Test func aWriteOfUnknownOutcomeKeepsItsKeyAndAKnownFailureFreesIt() {
        let idempotency = Idempotency(store: LocalIdempotencyStore(windowSeconds: 300, maxKeys: 10))
        let request = HTTPRequest(method: .post, target: "/api/topics/t/messages", headers: HTTPHeaders(), body: Array("1".utf8))
        var writes = 0
        let lost = idempotency.run(key("a"), scope: "", request: request) {
            writes += 1
            return .error(.outcomeUnknown("lost the connection to Redis before it answered"))
        }
        #expect(lost.response.status == .serviceUnavailable && !lost.outcomeKnown)
        let retry = idempotency.run(key("a"), scope: "", request: request) {
            writes += 1
            return .json(.created, ["seq": 2])
        }
        #expect(retry.response.status == .conflict && writes == 1, "the retry must not write")

        let refused = idempotency.run(key("b"), scope: "", request: request) {
            writes += 1
            return .error(.unavailable("Redis is unreachable"))
        }
        #expect(refused.response.status == .serviceUnavailable && writes == 2)
        let again = idempotency.run(key("b"), scope: "", request: request) {
            writes += 1
            return .json(.created, ["seq": 3])
        }
        #expect(again.response.status == .created && writes == 3, "nothing was written, so the retry goes ahead")
    }
}
