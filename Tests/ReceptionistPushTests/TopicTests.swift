@testable import ReceptionistPush
import ReceptionistJSON
import Testing

@Suite struct TopicTests {
    private func topic(history: Int, published: Int) -> Topic {
        let topic = Topic(name: "t", historyLimit: history, counters: PushCounters())
        for i in 0..<published {
            #expect(topic.publish(.number(Double(i)), publishedAt: UInt64(i)) == UInt64(i + 1))
        }
        return topic
    }

    @Test func replayGivesWhatIsKeptAndNamesWhatIsNot() {
        let topic = topic(history: 5, published: 12)
        let (gap, events) = topic.replay(after: 3)
        #expect(gap == 4...7)
        #expect(events.map(\.id) == [8, 9, 10, 11, 12])
    }

    @Test func replayInsideTheHistoryHasNoGap() {
        let topic = topic(history: 5, published: 12)
        let (gap, events) = topic.replay(after: 9)
        #expect(gap == nil)
        #expect(events.map(\.id) == [10, 11, 12])
        #expect(topic.replay(after: 12).events.isEmpty)
        #expect(topic.replay(after: 7).gap == nil)
        #expect(topic.replay(after: 6).gap == 7...7)
    }

    @Test func withoutHistoryEverythingMissedIsAGap() {
        let topic = topic(history: 0, published: 4)
        let (gap, events) = topic.replay(after: 1)
        #expect(gap == 2...4)
        #expect(events.isEmpty)
    }
}
