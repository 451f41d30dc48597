@testable import ReceptionistGateway
import Testing

@Suite struct WebSocketSessionStateTests {
    private let timing = WebSocketSessionState.Timing(
        pingIntervalMilliseconds: 30_000, pingTimeoutMilliseconds: 10_000, closeTimeoutMilliseconds: 2_000)

    private func fresh(now: UInt64 = 0) -> WebSocketSessionState {
        WebSocketSessionState(now: now)
    }

    private func tick(
        _ state: inout WebSocketSessionState, _ now: UInt64, _ timing: WebSocketSessionState.Timing? = nil
    ) -> WebSocketSessionState.Action {
        state.tick(now: now, timing ?? self.timing)
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

    /// Instants are kept cut to half a word: every deadline holds across the points where the
    /// cut values wrap (the 30 bits of a wait, the 32 of the last frame heard), with the loop's
    /// clock past 49 days of uptime.
    @Test func deadlinesHoldWhereTheKeptInstantsWrap() {
        for start: UInt64 in [(1 << 30) - 15_000, (1 << 32) - 15_000, (1 << 40) + (1 << 32) - 5_000] {
            var state = fresh(now: start)
            #expect(tick(&state, start + 29_999) == .none)
            #expect(tick(&state, start + 30_000) == .ping)
            #expect(tick(&state, start + 39_999) == .none)
            #expect(tick(&state, start + 40_000) == .abort)

            var closing = fresh(now: start)
            #expect(close(&closing, start + 14_000))
            #expect(tick(&closing, start + 15_999) == .none)
            #expect(tick(&closing, start + 16_000) == .abort)

            var answered = fresh(now: start)
            #expect(tick(&answered, start + 30_000) == .ping)
            answered.heard(now: start + 30_001)
            #expect(tick(&answered, start + 60_000) == .none)
            #expect(tick(&answered, start + 60_001) == .ping)
        }
    }

    @Test func aSpanLongerThanTheInstantsCanMeasureIsHeldToTheLongest() {
        let day: UInt64 = 86_400_000
        let long = WebSocketSessionState.Timing(
            pingIntervalMilliseconds: 30 * day, pingTimeoutMilliseconds: 20 * day, closeTimeoutMilliseconds: day)
        #expect(long.pingIntervalMilliseconds == WebSocketSessionState.Timing.longestMilliseconds)
        #expect(long.pingTimeoutMilliseconds == WebSocketSessionState.Timing.longestMilliseconds)
        #expect(long.closeTimeoutMilliseconds == day)
        var state = fresh()
        #expect(tick(&state, WebSocketSessionState.Timing.longestMilliseconds - 1, long) == .none)
        #expect(tick(&state, WebSocketSessionState.Timing.longestMilliseconds, long) == .ping)
    }
}
