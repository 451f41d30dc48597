import Testing
import ReceptionistWire

/// Header names and tokens compared without regard to ASCII case, and a target's path and query.
@Suite struct HTTPHeaderNameTests {
    @Test func namesCompareWithoutRegardToASCIICaseOnly() {
        #expect("Content-Length".asciiCaseInsensitiveEquals("content-length"))
        #expect("CONTENT-LENGTH".asciiCaseInsensitiveEquals("Content-Length"))
        #expect("chunked".asciiCaseInsensitiveEquals("ChUnKeD"))
        #expect("".asciiCaseInsensitiveEquals(""))
        #expect(!"Content-Length".asciiCaseInsensitiveEquals("Content-Lengt"))
        #expect(!"Content-Length".asciiCaseInsensitiveEquals("Content_Length"))
        // Only A–Z fold: `@` (0x40) and `` ` `` (0x60), `[` (0x5B) and `{` (0x7B) stay apart.
        #expect(!"@".asciiCaseInsensitiveEquals("`"))
        #expect(!"[".asciiCaseInsensitiveEquals("{"))
        // Bytes past ASCII compare exactly: `É` is not `é`.
        #expect(!"É".asciiCaseInsensitiveEquals("é"))
        #expect("é".asciiCaseInsensitiveEquals("é"))
    }

    @Test func aTargetSplitsAtItsFirstQuestionMark() {
        let cases: [(target: String, path: Substring, query: Substring?)] = [
            ("/api/topics/t/messages", "/api/topics/t/messages", nil),
            ("/a?b=1?c", "/a", "b=1?c"),
            ("/?", "/", ""),
            ("/caf%C3%A9/é?x=é", "/caf%C3%A9/é", "x=é"),
        ]
        for (target, path, query) in cases {
            let request = HTTPRequest(method: .get, target: target, versionMajor: 1, versionMinor: 1, headers: HTTPHeaders(), body: [], keepAlive: true, isUpgrade: false)
            #expect(request.rawPath == path, "\(target)")
            #expect(request.query == query, "\(target)")
        }
    }
}
