@testable import ReceptionistGateway
import Testing

@Suite struct WebSocketSessionStateTests {
    private let timing = WebSocketSessionState.Timing(
        pingIntervalMilliseconds: 30_000, pingTimeoutMilliseconds: 10_000, closeTimeoutMilliseconds: 2_000)

    private func fresh(now: UInt64 = 0) -> WebSocketSessionState {
        WebSocketSessionState(now: now)
    }

    private func tick(_ state: inout WebSocketSessionState, _ now: UInt64) -> WebSocketSessionState.Action {
        state.tick(now: now, timing)
    }

    private func close(_ state: inout WebSocketSessionState, _ now: UInt64) -> Bool {
        state.sendingClose(now: now)
    }

    @Test func aQuietPeerIsPingedOnceThenAbortedAfterThePingTimeout() {
        var state = fresh()
        #expect(tick(&state, 29_999) == .none)
        #expect(tick(&state, 30_000) == .ping)
        #expect(tick(&state, 35_000) == .none)
        #expect(tick(&state, 39_999) == .none)
        #expect(tick(&state, 40_000) == .abort)
    }

    @Test func anyFrameFromThePeerCancelsThePendingPing() {
        var state = fresh()
        #expect(tick(&state, 30_000) == .ping)
        state.heard(now: 31_000)
        #expect(tick(&state, 45_000) == .none)
        #expect(tick(&state, 61_000) == .ping)
    }

    @Test func afterOurCloseOnlyTheCloseTimeoutCounts() {
        var state = fresh()
        #expect(close(&state, 1_000))
        #expect(!close(&state, 1_500))
        #expect(state.closeSent)
        #expect(tick(&state, 2_999) == .none)
        #expect(tick(&state, 3_000) == .abort)
    }

    @Test func closeWaitsOutAPingInProgressOnItsOwnClock() {
        var state = fresh()
        #expect(tick(&state, 30_000) == .ping)
        #expect(close(&state, 30_500))
        #expect(tick(&state, 32_000) == .none)
        #expect(tick(&state, 32_500) == .abort)
    }

    @Test func theCloseTimeoutIsNotCancelledByWhatThePeerSends() {
        var state = fresh()
        #expect(close(&state, 1_000))
        state.heard(now: 2_000)
        #expect(state.closeSent)
        #expect(tick(&state, 2_999) == .none)
        #expect(tick(&state, 3_000) == .abort)
    }
}
