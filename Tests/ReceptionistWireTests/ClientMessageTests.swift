import ReceptionistWire
import Testing

@Suite struct ClientMessageTests {
    private func decode(_ text: String) -> Result<ClientMessage, ClientMessage.Problem> {
        ClientMessage.decode(Array(text.utf8))
    }

    private func code(_ text: String) -> String? {
        if case .failure(let problem) = decode(text) { return problem.code.rawValue }
        return nil
    }

    @Test func decodesEveryMessage() throws {
        #expect(try decode(#"{"type":"subscribe","store":"tiles"}"#).get() == .subscribe(.store("tiles"), since: nil))
        #expect(try decode(#"{"type":"subscribe","store":"tiles","since":1200}"#).get() == .subscribe(.store("tiles"), since: 1200))
        #expect(try decode(#"{"type":"subscribe","topic":"news","since":0}"#).get() == .subscribe(.topic("news"), since: 0))
        #expect(try decode(#"{"type":"subscribe","topic":"news","since":null}"#).get() == .subscribe(.topic("news"), since: nil))
        #expect(try decode(#"{"type":"subscribe","store":"s","since":3,"epoch":"ab12"}"#).get()
            == .subscribe(.store("s"), since: 3, epoch: "ab12"))
        #expect(try decode(#"{"type":"unsubscribe","topic":"news"}"#).get() == .unsubscribe(.topic("news")))
        #expect(try decode(#" {"store":"s","type":"unsubscribe","extra":[1]} "#).get() == .unsubscribe(.store("s")))
        #expect(try decode(#"{"type":"auth","token":"a.b.c"}"#).get() == .authenticate(token: "a.b.c"))
    }

    @Test(arguments: [
        ("", "bad_message"), ("{", "bad_message"), ("[]", "bad_message"), ("\"subscribe\"", "bad_message"),
        (#"{"store":"s"}"#, "bad_message"), (#"{"type":1,"store":"s"}"#, "bad_message"),
        (#"{"type":"publish","store":"s"}"#, "unknown_type"),
        (#"{"type":"auth"}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","epoch":7}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","epoch":""}"#, "bad_message"),
        (#"{"type":"auth","token":""}"#, "bad_message"),
        (#"{"type":"auth","token":7}"#, "bad_message"),
        (#"{"type":"subscribe"}"#, "bad_message"), (#"{"type":"subscribe","store":"s","topic":"t"}"#, "bad_message"),
        (#"{"type":"subscribe","store":5}"#, "bad_message"), (#"{"type":"subscribe","store":"s","since":-1}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","since":1.5}"#, "bad_message"), (#"{"type":"subscribe","store":"s","since":"3"}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","since":1e300}"#, "bad_message"),
    ])
    func refusesWithTheDocumentedCode(text: String, expected: String) {
        #expect(code(text) == expected)
    }

    @Test func sseEventsAreFramedPerTheStandard() {
        #expect(SSEEncoder.event("changes", id: 12, data: Array("{}".utf8)) == Array("event: changes\nid: 12\ndata: {}\n\n".utf8))
        #expect(SSEEncoder.event("gap", id: nil, data: Array("{}".utf8)) == Array("event: gap\ndata: {}\n\n".utf8))
        #expect(SSEEncoder.heartbeat == Array(": heartbeat\n\n".utf8))
    }
}
