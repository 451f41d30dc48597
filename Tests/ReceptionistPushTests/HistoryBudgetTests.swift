@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistTestSupport
import ReceptionistWire
import Testing

/// The groups of one store keep their events for resumes within one `--history-bytes` together:
/// each set of options kept up to the whole limit, so 64 filtered groups held 64 times it.
@Suite struct HistoryBudgetTests {
    @Test func manyGroupsKeepAtMostTheStoresBytesTogether() throws {
        let store = ModelStore(name: "s", historyLimit: 10_000)
        let context = ManualContext()
        let limit = 20_000
        let feed = StoreFeed(store: store, context: context, historyLimit: 1_000, historyBytes: limit, counters: PushCounters())
        // Every group's filter lets `m0`'s changes through: each would keep all of them.
        var sinks: [FakeSink] = []
        for group in 0..<64 {
            let sink = FakeSink()
            sinks.append(sink)
            feed.add(Subscription(target: .store("s"), sink: sink, options: SubscriptionOptions(models: ["m0", "x\(group)"])))
        }
        #expect(feed.groupCount == 65)
        let text = String(repeating: "v", count: 200)
        for n in 0..<400 {
            try store.commit([.put(model: "m0", value: ["n": .number(JSONNumber(Double(n))), "text": .string(text)])])
            if n % 16 == 15 { withExtendedLifetime(feed) { _ = context.drain() } }
        }
        withExtendedLifetime(feed) { _ = context.drain() }
        #expect(feed.keptHistoryBytes <= limit, "kept \(feed.keptHistoryBytes) bytes of events")
        #expect(feed.keptHistoryBytes > limit / 2, "the budget is used, not starved")
        // Nothing was lost to members: each got all 400 change sets.
        for sink in sinks { #expect(sink.events.filter { $0.name == "changes" }.count == 400) }
        // Groups that go give their bytes back.
        for (group, sink) in sinks.enumerated() {
            _ = sink
            feed.closeIfUnused(SubscriptionOptions(models: ["m0", "x\(group)"]))
        }
        #expect(feed.keptHistoryBytes <= limit)
    }
}
