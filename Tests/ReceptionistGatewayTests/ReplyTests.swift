@testable import ReceptionistGateway
import ReceptionistJSON
import Testing

@Suite struct ReplyTests {
    /// A publish's answer, written straight into bytes, is what encoding the object would give:
    /// the same members in the same order, a name escaped as JSON, every digit of the number.
    @Test func aPublishsAnswerIsTheEncodedObject() {
        for (topic, seq) in [("news", UInt64(1)), ("a.b-c_d", 1_234_567_890), ("t\"é", UInt64.max)] {
            let reply = Reply.published(topic: topic, seq: seq)
            #expect(reply.response.status == .created)
            #expect(reply.response.headers["Content-Type"] == "application/json")
            let object: JSONValue = ["topic": .string(topic), "seq": .number(JSONNumber(seq))]
            #expect(reply.response.body == JSONWriter.encode(object), "\(topic)")
        }
    }
}
