import Testing

@testable import receptionist_bench

@Suite struct PublishScheduleTests {
    @Test func messagesFallDueOnAnAbsoluteScheduleAndABehindPublisherCatchesUp() {
        var schedule = PublishSchedule(rate: 1000, duration: 1)
        #expect(schedule.step(at: 0, outstanding: 0) == .send(0))
        schedule.start(at: 10)
        #expect(schedule.step(at: 10.005, outstanding: 0) == .send(5))
        for _ in 0..<5 { schedule.didSend() }
        // Nothing sent for 10 ms: the 10 then due go at once, not one a tick.
        #expect(schedule.step(at: 10.015, outstanding: 0) == .send(10))
    }

    @Test func afterTheDurationItSettlesThenFinishesWhenEveryAnswerIsIn() {
        var schedule = PublishSchedule(rate: 100, duration: 1)
        schedule.start(at: 0)
        #expect(schedule.step(at: 1.5, outstanding: 0) == .send(100))
        for _ in 0..<100 { schedule.didSend() }
        #expect(schedule.step(at: 1.6, outstanding: 3) == .settle)
        #expect(schedule.step(at: 1.7, outstanding: 0) == .finish)
        #expect(schedule.seconds(now: 9) == 1)
    }

    @Test func theWaitForAnswersIsBounded() {
        var schedule = PublishSchedule(rate: 100, duration: 1)
        schedule.start(at: 0)
        _ = schedule.step(at: 1, outstanding: 0)
        #expect(schedule.step(at: 1 + PublishSchedule.settleSeconds + 0.1, outstanding: 7) == .finish)
    }
}
