import Foundation
@testable import ReceptionistPush
import ReceptionistModel
import ReceptionistSync
import Testing

/// A store group without `maxRate` takes every change set (`each`), and at most
/// `StoreGroup.maxChangeSetsPerDelivery` (256) wait for the loop: past them the committing job
/// waits, and nothing is lost (the queue table in docs/DESIGN.md).
@Suite struct StoreGroupBackpressureTests {
    @Test func aCommitterWaitsPastTwoHundredFiftySixUndeliveredChangeSetsAndNothingIsLost() throws {
        let push = PushFixture()
        let store = try push.createStore("s")
        let sink = FakeSink()
        try push.subscribe(sink, .store("s"))
        #expect(sink.trace == ["snapshot s 0"])

        let total = 300, limit = StoreGroup.maxChangeSetsPerDelivery
        let committed = ConditionLock(0)
        let committer = Thread {
            for n in 1...total {
                _ = try? store.put("m\(n % 7)", n)
                committed.withLock { $0 = n }
                committed.broadcast()
            }
        }
        committer.start()
        // How many commits have returned, once `until` holds or `seconds` have passed.
        func count(_ seconds: Double, until: @escaping (Int) -> Bool) -> Int {
            committed.wait(seconds: seconds, until: { until($0) }, then: { value, _ in value })
        }

        // The loop (this thread) has not run: the committer stops with 256 change sets waiting.
        #expect(count(10) { $0 >= limit } == limit)
        #expect(count(0.2) { $0 > limit } == limit, "a commit past the limit went on without the loop")
        #expect(push.drain() >= 1)
        // One delivery took the 256; the rest follow.
        #expect(count(10) { $0 == total } == total)
        push.drain()
        let versions = sink.trace.dropFirst()
        #expect(versions.count == total)
        #expect(Array(versions) == (1...total).map { "changes s \($0)" }, "every change set once, in order")
    }
}
