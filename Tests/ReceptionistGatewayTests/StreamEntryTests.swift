@testable import ReceptionistGateway
import ReceptionistLoop
import Testing

@Suite struct StreamEntryTests {
    private func bulk(_ text: String) -> RedisReply { .string(Array(text.utf8)) }

    @Test func anXREADReplyGivesEachEntryWithItsFields() {
        let reply = RedisReply.array([
            .array([
                bulk("rcpt:t:{news}:log"),
                .array([
                    .array([bulk("1700-0"), .array([bulk("s"), bulk("1"), bulk("t"), bulk("99"), bulk("d"), bulk("{\"a\":1}")])]),
                    .array([bulk("1700-1"), .array([bulk("s"), bulk("2"), bulk("d"), bulk("null")])]),
                ]),
            ]),
        ])
        let entries = StreamEntry.parse(xread: reply)
        #expect(entries.map(\.id) == ["1700-0", "1700-1"])
        #expect(entries[0].number("s") == 1 && entries[0].number("t") == 99)
        #expect(entries[0].fields["d"] == Array("{\"a\":1}".utf8))
        #expect(entries[1].number("t") == nil)
    }

    @Test func nothingNewOrAMalformedReplyGivesNoEntries() {
        #expect(StreamEntry.parse(xread: .null).isEmpty)
        #expect(StreamEntry.parse(xread: .array([])).isEmpty)
        #expect(StreamEntry.parse(xread: .array([.array([bulk("key")])])).isEmpty)
        let oneBad = RedisReply.array([.array([bulk("key"), .array([.integer(3), .array([bulk("1-0"), bulk("x")])])])])
        #expect(StreamEntry.parse(xread: oneBad).isEmpty)
    }

    @Test func anXREVRANGEReplyKeepsItsOrder() {
        let reply = RedisReply.array([
            .array([bulk("1700-2"), .array([bulk("s"), bulk("3")])]),
            .array([bulk("1700-1"), .array([bulk("s"), bulk("2")])]),
        ])
        #expect(StreamEntry.parse(range: reply).compactMap { $0.number("s") } == [3, 2])
        #expect(StreamEntry.parse(range: .array([])).isEmpty)
        #expect(StreamEntry.parse(range: .null).isEmpty)
    }

    @Test func flatPairsSkipWhatIsNotText() {
        let pairs = StreamEntry.pairs([bulk("a"), bulk("1"), .integer(7), bulk("2"), bulk("b"), bulk("3"), bulk("dangling")])
        #expect(pairs.map(\.0) == ["a", "b"])
        #expect(pairs.map(\.1) == [Array("1".utf8), Array("3".utf8)])
    }
}
