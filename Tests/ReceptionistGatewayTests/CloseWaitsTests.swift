import Testing

@testable import ReceptionistGateway

@Suite struct CloseWaitsTests {
    private final class Peer {}
    private let timeout: UInt64 = 2000

    /// A peer that keeps taking bytes is waited for, one close timeout at a time, up to 15 in
    /// all; one that takes none for a timeout, or has everything already, is not.
    @Test func aPeerIsWaitedForWhileItReadsAndNoLonger() {
        let waits = CloseWaits()
        let reading = Peer(), stalled = Peer(), done = Peer()
        #expect(!waits.peerStillReads(done, unsent: 0, now: 2000, timeout: timeout))
        #expect(waits.peerStillReads(stalled, unsent: 500, now: 2000, timeout: timeout))
        #expect(waits.peerStillReads(stalled, unsent: 500, now: 3000, timeout: timeout))
        #expect(!waits.peerStillReads(stalled, unsent: 500, now: 4000, timeout: timeout), "no byte taken for a timeout")
        var unsent = 1_000_000
        var now: UInt64 = 2000
        var waited = 0
        while waits.peerStillReads(reading, unsent: unsent, now: now, timeout: timeout) {
            waited += 1
            unsent -= 1000
            now += 1000
        }
        // 28 s past the first close timeout: 30 s in all.
        #expect(now - 2000 == 28_000 && waited == 28)
        #expect(waits.count == 0, "nothing is kept for a peer no longer waited for")
        _ = waits.peerStillReads(stalled, unsent: 10, now: 50_000, timeout: timeout)
        waits.forget(stalled)
        #expect(waits.count == 0)
    }
}
