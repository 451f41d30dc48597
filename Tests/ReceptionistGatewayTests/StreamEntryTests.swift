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
        #expect(entries[0].field("d") == Array("{\"a\":1}".utf8))
        #expect(entries[1].number("t") == nil)
        #expect(entries[1].field("x") == nil && entries[1].field("") == nil && entries[1].field("dd") == nil)
    }

    @Test func aFieldIsFoundByItsNameAmongTheOthers() {
        let flat: [RedisReply] = [.integer(7), bulk("x"), bulk("e"), bulk("ab"), bulk("d"), .null, bulk("n"), bulk("12"), bulk("odd")]
        let entry = StreamEntry(id: "1-0", fields: StreamEntry.pairs(flat))
        #expect(entry.field("e") == Array("ab".utf8))
        #expect(entry.field("d") == nil, "a value that is not a string")
        #expect(entry.number("n") == 12 && entry.number("e") == nil)
        #expect(entry.field("x") == nil, "a value in a name's place is not a name")
        #expect(entry.field("odd") == nil, "a name without a value")
    }

    @Test func nothingNewOrAMalformedReplyGivesNoEntries() {
        #expect(StreamEntry.parse(xread: RedisReply.null).isEmpty)
        #expect(StreamEntry.parse(xread: RedisReply.array([])).isEmpty)
        #expect(StreamEntry.parse(xread: RedisReply.array([.array([bulk("key")])])).isEmpty)
        let oneBad = RedisReply.array([.array([bulk("key"), .array([.integer(3), .array([bulk("1-0"), bulk("x")])])])])
        #expect(StreamEntry.parse(xread: oneBad).isEmpty)
    }

    @Test func anXREVRANGEReplyKeepsItsOrder() {
        let reply = RedisReply.array([
            .array([bulk("1700-2"), .array([bulk("s"), bulk("3")])]),
            .array([bulk("1700-1"), .array([bulk("s"), bulk("2")])]),
        ])
        #expect(StreamEntry.parse(range: reply).compactMap { $0.number("s") } == [3, 2])
        #expect(StreamEntry.parse(range: RedisReply.array([])).isEmpty)
        #expect(StreamEntry.parse(range: RedisReply.null).isEmpty)
    }

    @Test func flatPairsSkipWhatIsNotText() {
        let pairs = StreamEntry.pairs([RedisReply]([bulk("a"), bulk("1"), .integer(7), bulk("2"), bulk("b"), bulk("3"), bulk("dangling")]))
        #expect(pairs.map(\.name) == ["a", "b"])
        #expect(pairs.map(\.value) == [Array("1".utf8), Array("3".utf8)])
    }
}
