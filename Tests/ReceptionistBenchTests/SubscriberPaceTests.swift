import Glibc
import Testing

@testable import receptionist_bench

@Suite struct SubscriberPaceTests {
    @Test func aPublisherLevelWithTheSubscribersMaySendItsWholeWindow() {
        #expect(SubscriberPace.allowance(100, sent: 500, averageDelivered: 500, ahead: 32) == 32)
        #expect(SubscriberPace.allowance(5, sent: 500, averageDelivered: 500, ahead: 32) == 5)
    }

    @Test func aPublisherAheadMaySendOnlyWhatKeepsItWithinTheBound() {
        #expect(SubscriberPace.allowance(100, sent: 520, averageDelivered: 500, ahead: 32) == 12)
        #expect(SubscriberPace.allowance(100, sent: 532, averageDelivered: 500, ahead: 32) == 0)
        // Subscribers behind by more than the bound (say, one dropped): nothing, never negative.
        #expect(SubscriberPace.allowance(100, sent: 600, averageDelivered: 500, ahead: 32) == 0)
    }

    @Test func theCountsThatSubscriberProcessesShareAreSummedAndAveraged() throws {
        let paths = (0..<2).map { "/tmp/receptionist-pace-test-\(getpid())-\($0)" }
        defer { for path in paths { unlink(path) } }
        let writers = try paths.map { try SharedCounter(path: $0, create: true) }
        writers[0].value = 3_000
        writers[1].value = 1_000
        let pace = try SubscriberPace(files: paths, subscribers: 40, ahead: 32)
        #expect(pace.averageDelivered == 100)
        #expect(pace.allowance(50, sent: 120) == 12)
        writers[1].value += 800
        #expect(pace.averageDelivered == 120)
    }
}
