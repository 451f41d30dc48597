@testable import ReceptionistGateway
import Testing

/// The body of `POST /api/publish`, parsed without IO: each message's data as the bytes written.
@Suite struct TopicBatchTests {
    private func parse(_ body: String) -> [(topic: String, data: String)]? {
        guard case .success(let messages) = TopicAPI.batch(Array(body.utf8)) else { return nil }
        return messages.map { ($0.topic, String(decoding: $0.data, as: UTF8.self)) }
    }

    @Test func everyMessageKeepsItsDataAsWritten() throws {
        let messages = try #require(parse(#"{"messages":[ {"topic":"a","data": {"b": 1.10, "c":"\u00e9"}}, {"data":[1, 2],"topic":"b"} ]}"#))
        #expect(messages.map(\.topic) == ["a", "b"])
        #expect(messages.map(\.data) == [#"{"b":1.10,"c":"\u00e9"}"#, "[1,2]"])
    }

    @Test(arguments: [
        "", "not json", "[]", #"{"messages":{}}"#, #"{"messages":[]}"#, #"{"other":[]}"#,
        #"{"messages":[1]}"#, #"{"messages":[{"topic":"a"}]}"#, #"{"messages":[{"data":1}]}"#,
        #"{"messages":[{"topic":7,"data":1}]}"#,
    ])
    func aBadBodyIsRefused(body: String) {
        #expect(parse(body) == nil)
    }

    @Test func atMostMaxBatchMessages() {
        let one = #"{"topic":"t","data":0}"#
        let full = #"{"messages":["# + Array(repeating: one, count: TopicAPI.maxBatch).joined(separator: ",") + "]}"
        #expect(parse(full)?.count == TopicAPI.maxBatch)
        let over = #"{"messages":["# + Array(repeating: one, count: TopicAPI.maxBatch + 1).joined(separator: ",") + "]}"
        #expect(parse(over) == nil)
    }
}
