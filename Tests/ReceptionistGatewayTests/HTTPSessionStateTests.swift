@testable import ReceptionistGateway
import Testing

@Suite struct HTTPSessionStateTests {
    private func fresh(now: UInt64 = 0) -> HTTPSessionState {
        HTTPSessionState(now: now, idleTimeoutMilliseconds: 60_000, headTimeoutMilliseconds: 10_000)
    }

    @Test func idleConnectionClosesAfterIdleTimeout() {
        let state = fresh()
        #expect(state.deadline(now: 59_999) == .none)
        #expect(state.deadline(now: 60_000) == .close)
    }

    @Test func slowHeadTimesOutFromItsFirstByteNotItsLast() {
        var state = fresh()
        state.received(phase: .head, now: 1_000)
        // Trickling bytes keeps the connection active but does not extend the head deadline.
        for t in stride(from: UInt64(1_500), to: 11_000, by: 500) {
            state.received(phase: .head, now: t)
        }
        #expect(state.deadline(now: 10_999) == .none)
        #expect(state.deadline(now: 11_000) == .timeOut)
    }

    /// A pipelining client whose every read ends one head and starts the next: each head has its
    /// own time from its start. The first head's start counted for all, and a 408 came.
    @Test func aHeadStartedInTheReadThatEndedARequestHasItsOwnTime() {
        var state = fresh()
        state.received(phase: .head, now: 1_000)
        for t in stride(from: UInt64(2_000), through: 30_000, by: 1_000) {
            state.received(phase: .head, completed: true, now: t)
            #expect(state.deadline(now: t + 9_999) == .none)
        }
        #expect(state.deadline(now: 40_000) == .timeOut)
    }

    /// A body has the idle time-out to arrive whole from its start, however slowly it trickles:
    /// a byte now and then holds no connection for good.
    @Test func aBodyHasTheIdleTimeOutToArriveWhole() {
        var state = fresh()
        state.received(phase: .body, now: 0)
        for t in stride(from: UInt64(1_000), through: 59_000, by: 1_000) { state.received(phase: .body, now: t) }
        #expect(state.deadline(now: 59_999) == .none)
        #expect(state.deadline(now: 60_000) == .timeOut)
    }

    /// A client that takes the replies held back for it reads slowly, and is not idle: only one
    /// that takes nothing for the idle time-out is closed.
    @Test func aClientTakingItsRepliesIsNotIdle() {
        var state = fresh()
        state.progressed(now: 50_000)
        #expect(state.deadline(now: 109_999) == .none)
        #expect(state.deadline(now: 110_000) == .close)
    }

    /// While the gateway does not read (its replies wait for the client), a head begun before
    /// is not late: only a client that takes nothing for the idle time-out is closed, and the
    /// head's time starts again when reading does.
    @Test func aHeadIsNotLateWhileTheGatewayHoldsReading() {
        var state = fresh()
        state.received(phase: .head, now: 1_000)
        for t in stride(from: UInt64(2_000), through: 50_000, by: 1_000) {
            state.readingHeld(now: t)
            state.progressed(now: t)
            #expect(state.deadline(now: t, readingHeld: true) == .none)
        }
        #expect(state.deadline(now: 109_999, readingHeld: true) == .none)
        #expect(state.deadline(now: 110_000, readingHeld: true) == .close)
        // Reading again from 50 s: the head has its 10 s from then.
        #expect(state.deadline(now: 59_999) == .none)
        #expect(state.deadline(now: 60_000) == .timeOut)
    }

    @Test func completedRequestResetsTheIdleClock() {
        var state = fresh()
        state.received(phase: .head, now: 100)
        let keepAlive = state.requestCompleted(keepAlive: true)
        #expect(keepAlive)
        state.received(phase: .idle, now: 5_000)
        #expect(state.afterResponse() == .none)
        #expect(state.deadline(now: 64_999) == .none)
        #expect(state.deadline(now: 65_000) == .close)
    }

    @Test func connectionCloseEndsAfterTheResponse() {
        var state = fresh()
        state.received(phase: .idle, now: 10)
        let keepAlive = state.requestCompleted(keepAlive: false)
        #expect(keepAlive == false)
        #expect(state.afterResponse() == .close)
    }

    @Test func drainClosesIdleAtOnceAndWaitsForRequestsInFlight() {
        var idle = fresh()
        let idleAction = idle.drain()
        #expect(idleAction == .close)

        var busy = fresh()
        busy.received(phase: .head, now: 10)
        let busyAction = busy.drain()
        #expect(busyAction == .none)
        #expect(busy.afterResponse() == .none)
        busy.received(phase: .idle, now: 20)
        // The request in flight is answered with `Connection: close`.
        let keepAlive = busy.requestCompleted(keepAlive: true)
        #expect(keepAlive == false)
        #expect(busy.afterResponse() == .close)
    }

    /// After a request that closes, no later one is taken, not even one whose head began in the
    /// same read; and the connection does not wait for it. A drain still lets the request in
    /// progress finish, and takes none after it.
    @Test func afterAClosingRequestNoLaterOneIsTaken() {
        var state = fresh()
        state.received(phase: .head, completed: true, now: 10)  // the next head began in the same read
        #expect(state.takesRequests)
        _ = state.requestCompleted(keepAlive: false)
        #expect(!state.takesRequests)
        #expect(state.afterResponse() == .close)

        var draining = fresh()
        draining.received(phase: .head, now: 10)
        _ = draining.drain()
        #expect(draining.takesRequests, "the request in progress finishes")
        _ = draining.requestCompleted(keepAlive: true)
        draining.received(phase: .head, now: 20)
        #expect(!draining.takesRequests)
        #expect(draining.afterResponse() == .close)
    }
}
