import Testing
@testable import ReceptionistWire

/// RFC 9112 §3.2: an HTTP/1.1 request without Host, any request with two Host lines or an
/// invalid Host is answered 400.
@Suite struct HTTPHostTests {
    @Test(arguments: [
        "example.com", "example.com:8080", "127.0.0.1", "127.0.0.1:0", "[::1]", "[::1]:8080", "[2001:db8::1.2.3.4]",
        "[v1.fe80::a+en1]", "a-b_c~d.e", "%41bc", "sub!$&'()*+,;=x", " example.com ", "host:", "a:65535", "a:00080",
    ])
    func validHosts(_ value: String) {
        #expect(HTTPHost.isValid(value), "\(value)")
    }

    @Test(arguments: [
        "exa mple.com", "example.com:80a", "example.com:80:81", "[::1", "::1", "[]", "[zz::1]", "[::1]x", "a/b", "a@b",
        "%4", "%zz", "a\"b", "a\\b", "é.example", "[v.x]", "[v1.]", "a\u{1}b", "", " ", ":80", "a:65536", "a:99999",
        "a:999999", "a:-1", "a: 80",
    ])
    func invalidHosts(_ value: String) {
        #expect(!HTTPHost.isValid(value), "\(value)")
    }

    @Test func theParserAnswers400ForAMissingRepeatedOrInvalidHost() {
        func status(_ text: String) -> HTTPStatus? {
            HTTPRequestParser().parse(Array(text.utf8)).error?.status
        }
        #expect(status("GET / HTTP/1.1\r\n\r\n") == .badRequest)
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n") == .badRequest)
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n") == .badRequest)
        #expect(status("GET / HTTP/1.1\r\nHost: a b\r\n\r\n") == .badRequest)
        #expect(status("GET / HTTP/1.1\r\nHost: a:x\r\n\r\n") == .badRequest)
        #expect(status("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n") == .badRequest)
        // HTTP/1.0 may leave it out; an empty one names no host of an `http` URI (RFC 9110 §4.2.1).
        #expect(status("GET / HTTP/1.0\r\n\r\n") == nil)
        #expect(status("GET / HTTP/1.1\r\nHost:\r\n\r\n") == .badRequest)
        #expect(status("GET / HTTP/1.1\r\nHost: a:70000\r\n\r\n") == .badRequest)
        #expect(status("GET / HTTP/1.1\r\nhOsT: 127.0.0.1:8080\r\n\r\n") == nil)
        let error = HTTPRequestParser().parse(Array("GET / HTTP/1.1\r\n\r\n".utf8)).error
        #expect(error?.detail == "an HTTP/1.1 request needs a Host header")
    }
}
