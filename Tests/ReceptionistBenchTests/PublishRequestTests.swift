import Testing

@testable import receptionist_bench

@Suite struct PublishRequestTests {
    /// The request laid out once is, byte for byte, the one built from strings: the same head,
    /// a Content-Length that counts the stamp's digits, and `Publisher.body`'s message.
    @Test(arguments: [0, 7, 10, 99_999, 1_764_000_000_123_456, UInt64.max])
    func theRequestIsTheOneBuiltFromStrings(sentAt: UInt64) {
        let request = PublishRequest(path: "/api/topics/bench/messages", host: "127.0.0.1", port: 8080)
        let body = Publisher.body(sentAt: sentAt)
        let expected = "POST /api/topics/bench/messages HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
        let bytes = request.bytes(sentAt: sentAt)
        #expect(String(decoding: bytes.withUnsafeBytes { Array($0) }, as: UTF8.self) == expected)
        #expect(bytes.count == expected.utf8.count)
    }
}
