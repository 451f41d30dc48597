import ReceptionistWire
import Testing

@Suite struct QueryFlagTests {
    @Test func yesAndNoAreReadOneWay() {
        for yes in ["true", "1", ""] { #expect(QueryFlag.value(yes) == true, "\(yes)") }
        for no in ["false", "0"] { #expect(QueryFlag.value(no) == false, "\(no)") }
        #expect(QueryFlag.value(nil) == false)
        for bad in ["yes", "TRUE", "2", " true", "on"] { #expect(QueryFlag.value(bad) == nil, "\(bad)") }
    }

    @Test func everyFlagOfAStreamIsReadAlike() throws {
        let options = SubscriptionOptions.decode(query: { $0 == "old" ? ["1"] : [] })
        #expect(try options.get().old == true)
        guard case .failure(let problem) = SubscriptionOptions.decode(query: { $0 == "old" ? ["yes"] : [] }) else {
            Issue.record("old=yes was accepted")
            return
        }
        #expect(problem.message.contains("1 or 0"))
    }
}
