import Testing
@testable import ReceptionistWire

@Suite struct HTTPResponseEncoderTests {
    @Test func headCarriesDateLengthAndConnection() {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/plain")
        let response = HTTPResponse(status: .ok, headers: headers, body: Array("hi".utf8))
        let text = String(decoding: HTTPResponseEncoder.head(response, date: "D", keepAlive: true), as: UTF8.self)
        #expect(text == "HTTP/1.1 200 OK\r\nDate: D\r\nContent-Length: 2\r\nConnection: keep-alive\r\nContent-Type: text/plain\r\n\r\n")
        let closing = String(decoding: HTTPResponseEncoder.head(response, date: "D", keepAlive: false, contentLength: 9), as: UTF8.self)
        #expect(closing.contains("Content-Length: 9\r\nConnection: close\r\n"))
    }

    /// Written in one pass into memory sized first, the head is what joining its parts gives:
    /// any status, no header or several (empty values and non-ASCII text among them), lengths of
    /// every size, and an inline body after it. A 204 and a 304 carry no Content-Length (RFC
    /// 9110, section 8.6).
    @Test func theHeadIsItsPartsInOrderWhateverTheirSizes() {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("X-Empty", "")
        headers.add("X-Name", "café ✓")
        let cases: [(HTTPStatus, HTTPHeaders, Int, [UInt8])] = [
            (.ok, HTTPHeaders(), 0, []), (.created, headers, 27, Array(#"{"topic":"t","seq":1}"#.utf8)),
            (.payloadTooLarge, headers, 1_234_567_890, []), (.noContent, HTTPHeaders(), 0, Array("x".utf8)),
            (.notModified, headers, 8701, []),
        ]
        for (status, fields, length, body) in cases {
            for keepAlive in [true, false] {
                let response = HTTPResponse(status: status, headers: fields, body: [])
                let head = body.withUnsafeBytes {
                    HTTPResponseEncoder.head(response, date: "Sat, 28 Nov 2026 00:00:00 GMT", keepAlive: keepAlive,
                        contentLength: length, inlineBody: body.isEmpty ? nil : $0)
                }
                var expected = "HTTP/1.1 \(status.code) \(status.reason)\r\nDate: Sat, 28 Nov 2026 00:00:00 GMT\r\n"
                if status.code != 204 && status.code != 304 { expected += "Content-Length: \(length)\r\n" }
                expected += "Connection: \(keepAlive ? "keep-alive" : "close")\r\n"
                for field in fields.fields { expected += "\(field.name): \(field.value)\r\n" }
                expected += "\r\n" + String(decoding: body, as: UTF8.self)
                #expect(head == Array(expected.utf8), "\(status.code)")
            }
        }
    }

    @Test func errorBodiesAreJSON() {
        let response = HTTPResponse.error(.payloadTooLarge, "too \"big\"\n")
        #expect(response.status.code == 413)
        #expect(response.headers["content-type"] == "application/json")
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"error":"payload_too_large","detail":"too \"big\"\n"}"#)
    }
}

@Suite struct HTTPDateTests {
    @Test(arguments: [
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
        (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
        (1_795_305_600, "Sun, 22 Nov 2026 00:00:00 GMT"),
        (4_102_444_799, "Thu, 31 Dec 2099 23:59:59 GMT"),
    ])
    func formatsIMFFixdate(_ seconds: Int, _ expected: String) {
        #expect(HTTPDate.format(epochSeconds: seconds) == expected)
    }
}

@Suite struct JSONTextTests {
    @Test func quotesControlCharacters() {
        #expect(JSONText.quote("a\u{1}b\tc\"d\\") == #""a\u0001b\tc\"d\\""#)
        #expect(JSONText.quote("é✓") == "\"é✓\"")
    }
}

@Suite struct SHA1Tests {
    @Test func matchesKnownDigests() {
        #expect(SHA1.hex(Array("abc".utf8)) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(SHA1.hex([]) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    }
}
