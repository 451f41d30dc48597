import ReceptionistWire
import Testing

@Suite struct IdempotencyKeyTests {
    @Test func oneTo255VisibleASCIICharacters() {
        #expect(IdempotencyKey(header: "a")?.text == "a")
        #expect(IdempotencyKey(header: String(repeating: "x", count: 255)) != nil)
        let visible = String(decoding: (0x21...0x7E).map { UInt8($0) }, as: UTF8.self)
        #expect(IdempotencyKey(header: visible)?.text == visible)
    }

    @Test(arguments: ["", " ", "a b", "a\tb", "é", String(repeating: "x", count: 256), "a\u{7F}"])
    func anythingElseIsRefused(_ header: String) {
        #expect(IdempotencyKey(header: header) == nil)
    }

    @Test func theFingerprintTellsRequestsApart() {
        let base = IdempotencyKey.fingerprint(method: "POST", target: "/api/topics/t/messages", body: Array("1".utf8))
        #expect(base.count == 32)
        #expect(base == IdempotencyKey.fingerprint(method: "POST", target: "/api/topics/t/messages", body: Array("1".utf8)))
        #expect(base != IdempotencyKey.fingerprint(method: "POST", target: "/api/topics/u/messages", body: Array("1".utf8)))
        #expect(base != IdempotencyKey.fingerprint(method: "POST", target: "/api/topics/t/messages", body: Array("2".utf8)))
        #expect(base != IdempotencyKey.fingerprint(method: "PUT", target: "/api/topics/t/messages", body: Array("1".utf8)))
    }
}
