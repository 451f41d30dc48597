@testable import ReceptionistGateway
import Testing

@Suite struct SSESessionStateTests {
    private func fresh(now: UInt64 = 0) -> SSESessionState {
        SSESessionState(now: now, heartbeatMilliseconds: 15_000, lingerMilliseconds: 2_000)
    }

    @Test func aQuietStreamGetsOneHeartbeatPerInterval() {
        var state = fresh()
        #expect(state.tick(now: 14_999) == .none)
        #expect(state.tick(now: 15_000) == .heartbeat)
        #expect(state.tick(now: 15_001) == .none)
        #expect(state.tick(now: 29_999) == .none)
        #expect(state.tick(now: 30_000) == .heartbeat)
    }

    @Test func everyWritePostponesTheHeartbeat() {
        var state = fresh()
        state.wrote(now: 10_000)
        #expect(state.tick(now: 15_000) == .none)
        #expect(state.tick(now: 24_999) == .none)
        #expect(state.tick(now: 25_000) == .heartbeat)
    }

    @Test func theGoodbyeIsSaidOnceAndThenNoHeartbeatIsDue() {
        var state = fresh()
        #expect(!state.ended)
        let first = state.ending(now: 10_000)
        #expect(first)
        #expect(state.ended)
        let second = state.ending(now: 10_500)
        #expect(!second, "a second goodbye (drain after expiry, say) must not be written")
        #expect(state.tick(now: 11_999) == .none)
    }

    /// A stream that said goodbye closes once what was queued is read; one whose client reads
    /// nothing is closed a linger after the goodbye (it kept its subscription, its presence and a
    /// stream its token no longer covered).
    @Test func aGoodbyeNotReadWithinTheLingerIsAborted() {
        var state = fresh()
        _ = state.ending(now: 10_000)
        #expect(state.tick(now: 11_999) == .none)
        #expect(state.tick(now: 12_000) == .abort)
        #expect(state.tick(now: 12_500) == .abort, "asked again at each sweep while the peer still reads")
    }

    @Test func theLoopClockMayWrapWithoutAStorm() {
        var state = fresh(now: UInt64.max - 1_000)
        #expect(state.tick(now: UInt64.max) == .none)
        #expect(state.tick(now: 14_000) == .heartbeat)
    }
}
