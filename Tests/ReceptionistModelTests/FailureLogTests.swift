import ReceptionistModel
import Testing

@Suite struct FailureLogTests {
    @Test func theFirstFailureIsLoggedThenOneAnIntervalWithTheCountBetween() {
        var log = FailureLog(intervalSeconds: 10)
        let logged = [100, 101, 109.9, 110, 115].map { log.failed(now: $0) }
        // The last two unlogged and this one at 110; quiet again until 120.
        #expect(logged == [1, nil, nil, 3, nil])
    }

    @Test func workingAgainIsLoggedOnceAndOnlyAfterALoggedFailure() {
        var log = FailureLog(intervalSeconds: 10)
        var said: [String] = []
        func fail(_ now: Double) { if let count = log.failed(now: now) { said.append("failed \(count)") } }
        func work() { if log.succeeded() { said.append("works") } }
        work()
        fail(0)
        work()
        work()
        // Failing and working by turns within the interval: quiet both ways.
        fail(1)
        work()
        fail(12)
        work()
        #expect(said == ["failed 1", "works", "failed 2", "works"])
    }
}
