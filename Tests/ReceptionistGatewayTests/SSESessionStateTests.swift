@testable import ReceptionistGateway
import Testing

@Suite struct SSESessionStateTests {
    private func fresh(now: UInt64 = 0) -> SSESessionState {
        SSESessionState(now: now, heartbeatMilliseconds: 15_000)
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

    @Test func theGoodbyeIsSaidOnceAndThenNothingIsDue() {
        var state = fresh()
        #expect(!state.ended)
        let first = state.ending()
        #expect(first)
        #expect(state.ended)
        let second = state.ending()
        #expect(!second, "a second goodbye (drain after expiry, say) must not be written")
        #expect(state.tick(now: 60_000) == .none)
    }

    @Test func theLoopClockMayWrapWithoutAStorm() {
        var state = fresh(now: UInt64.max - 1_000)
        #expect(state.tick(now: UInt64.max) == .none)
        #expect(state.tick(now: 14_000) == .heartbeat)
    }
}
