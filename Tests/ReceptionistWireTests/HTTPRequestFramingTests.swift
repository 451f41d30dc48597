import Testing
@testable import ReceptionistWire

/// Where a request ends, and what keeps its connection, as RFC 9112 has it where http-parser as
/// packaged is lenient.
@Suite struct HTTPRequestFramingTests {
    private static let chunkedHead = "POST /t HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    private static let next = "GET /next HTTP/1.1\r\nHost: t\r\n\r\n"

    /// Each was a whole body to http-parser, and the request after it was served.
    @Test(arguments: ["2\rX{}\r\n0\r\n\r\n", "2;a\rX{}\r\n0\r\n\r\n", "0\rX\r\n", "0\r\n\rX", "2 \r\n{}\r\n0\r\n\r\n",
                      "2;\u{1}\r\n{}\r\n0\r\n\r\n"])
    func malformedChunkedFramingIsRefusedHoweverItIsSplit(_ body: String) {
        let bytes = Array((Self.chunkedHead + body + Self.next).utf8)
        let splits = [[bytes], bytes.map { [$0] }] + (1..<bytes.count).map { [Array(bytes[..<$0]), Array(bytes[$0...])] }
        for pieces in splits {
            let output = parse(pieces)
            #expect(output.error?.status == .badRequest, "\(body.debugDescription) in \(pieces.count) pieces")
            #expect(output.requests.isEmpty)
        }
    }

    /// Found by fuzzing the strict framing: whole, http-parser's 413 came first (its data
    /// callback saw the size past the limit), split, the framing's 400; and a checked message's
    /// framing was still applied to the next one's first bytes. A size past the limit is now
    /// refused at its size line, and each message's framing ends with it.
    @Test(arguments: [
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\rld\rSeq\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nhello\r\n6;ext=1\r\nTer: \n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n\r\n\r\u{0B}",
    ])
    func theAnswerDoesNotDependOnTheSplit(_ text: String) {
        let bytes = Array(text.utf8)
        func run(_ pieces: [[UInt8]]) -> HTTPRequestParser.Output {
            parse(pieces, limits: HTTPParserLimits(maxHeadBytes: 16_384, maxBodyBytes: 7))
        }
        let whole = run([bytes])
        #expect(whole.error != nil)
        for pieces in [bytes.map { [$0] }] + (1..<bytes.count).map({ [Array(bytes[..<$0]), Array(bytes[$0...])] }) {
            let split = run(pieces)
            #expect(split.error == whole.error && split.requests.count == whole.requests.count, "\(pieces.count) pieces, first \(pieces[0].count)")
        }
    }

    @Test func aChunkedBodyWithExtensionsAndTrailersIsServed() throws {
        let output = parse(Self.chunkedHead + "2;name=value\r\n{}\r\n0\r\nX-Trailer: y\r\n\r\n" + Self.next)
        #expect(output.error == nil)
        #expect(output.requests.map(\.target) == ["/t", "/next"])
        #expect(try #require(output.requests.first).body == Array("{}".utf8))
    }

    /// HTTP/1.0 has no transfer codings: a request with one is faulty (RFC 9112, section 6.1).
    /// It was decoded as chunked and its connection kept.
    @Test func transferEncodingInHTTP10IsRefused() {
        let text = "POST /t HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        let output = parse(text)
        #expect(output.error?.status == .badRequest)
        #expect(output.requests.isEmpty)
    }

    /// `close` anywhere in Connection closes (RFC 9112, section 9.6); HTTP/1.0 kept the connection
    /// when keep-alive was named too.
    @Test(arguments: ["Connection: keep-alive\r\nConnection: close\r\n", "Connection: keep-alive, close\r\n",
                      "Connection: Keep-Alive,CLOSE\r\n"])
    func closeAnywhereClosesHTTP10(_ fields: String) throws {
        let request = try #require(parse("GET / HTTP/1.0\r\n\(fields)\r\n").requests.first)
        #expect(!request.keepAlive)
        let kept = try #require(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").requests.first)
        #expect(kept.keepAlive)
    }

    /// A target in absolute form names the host (RFC 9112, section 3.2.2), held to Host's rules.
    @Test(arguments: ["http:///healthz", "http://[::1/healthz", "http://x:99999/healthz", "http://a@b/healthz",
                      "HTTP://a b/"])
    func anAbsoluteTargetsAuthorityIsChecked(_ target: String) {
        #expect(parse("GET \(target) HTTP/1.1\r\nHost: t\r\n\r\n").error?.status == .badRequest, "\(target)")
    }

    @Test func anAbsoluteTargetsAuthorityIsTheHost() throws {
        let request = try #require(parse("GET http://example.org:81/healthz?x HTTP/1.1\r\nHost: t\r\n\r\n").requests.first)
        #expect(request.target == "/healthz?x")
        #expect(request.headers.values("Host") == ["example.org:81"])
        let path = try #require(parse("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").requests.first)
        #expect(path.headers.values("Host") == ["t"])
    }

    /// A HEAD's refusal has no body from the moment its target starts: a head too large, or
    /// with a bad field, was refused with one.
    @Test func aHeadRefusedWhileItsHeadIsReadIsKnownToBeAHead() {
        let parser = HTTPRequestParser()
        #expect(parser.parse(Array("HEAD /x HTTP/1.1\r\nHost: t\r\nBad Name: x\r\n\r\n".utf8)).error?.status == .badRequest)
        #expect(parser.headRequest)
        let trickled = HTTPRequestParser()
        _ = trickled.parse(Array("HEAD /x HTTP/1.1\r\nHo".utf8))
        #expect(trickled.headRequest)
        let get = HTTPRequestParser()
        _ = get.parse(Array("GET /x HTTP/1.1\r\nHo".utf8))
        #expect(!get.headRequest)
    }

    /// One empty line before a request is ignored (RFC 9112, section 2.2); more start a head, so
    /// that a client trickling empty lines is held to the head's time-out. They were idle time.
    @Test func emptyLinesBeyondTheFirstStartAHead() {
        let parser = HTTPRequestParser()
        _ = parser.parse(Array("\r\n".utf8))
        #expect(parser.phase == .idle)
        _ = parser.parse(Array("\r\n".utf8))
        #expect(parser.phase == .head)
        #expect(parser.parse(Array(Self.next.utf8)).requests.count == 1)
        #expect(parser.phase == .idle)
        _ = parser.parse(Array("\n".utf8))
        #expect(parser.phase == .idle)
    }
}
