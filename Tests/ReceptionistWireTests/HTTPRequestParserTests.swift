import ReceptionistJSON
import Testing
@testable import ReceptionistWire

private let validRequests: [String] = [
    "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /healthz?x=1&y=%20 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nX-Long: \(String(repeating: "v", count: 300))\r\n\r\n",
    "POST /api/things HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\nContent-Type: application/json\r\n\r\n{\"a\":[1,2]}",
    "PUT /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: t\r\n\r\n",
    "HEAD /index.html HTTP/1.0\r\n\r\n",
    "DELETE /a/b HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "GET /caf%C3%A9 HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Bytes: caf\u{E9}\r\nX-Spaces:   b  \r\n\r\n",
]

/// The fields of `text`'s head as a reader of RFC 9112 takes them: each line up to the blank one
/// split at its first colon, the value without the spaces around it.
private func expectedFields(_ text: String) -> [(name: String, value: String)] {
    // "\r\n" is one Character.
    let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
    return lines.dropFirst().prefix { !$0.isEmpty }.map { line in
        let colon = line.firstIndex(of: ":")!
        return (String(line[..<colon]), String(line[line.index(after: colon)...].trimmingSpaces()))
    }
}

@Suite struct HTTPRequestParserTests {
    @Test func parsesASimpleGet() throws {
        let output = parse("GET /healthz?verbose=1 HTTP/1.1\r\nHost: example\r\nX-A: 1\r\n\r\n")
        #expect(output.error == nil)
        let request = try #require(output.requests.first)
        #expect(request.method == .get)
        #expect(request.target == "/healthz?verbose=1")
        #expect(request.rawPath == "/healthz")
        #expect(request.query == "verbose=1")
        #expect(request.headers["host"] == "example")
        #expect(request.headers["X-A"] == "1")
        #expect(request.keepAlive)
        #expect(request.versionMinor == 1)
    }

    @Test(arguments: validRequests)
    func everySplitParsesTheSame(_ text: String) throws {
        let bytes = Array(text.utf8)
        let whole = parse([bytes])
        #expect(whole.error == nil)
        #expect(whole.requests.count == 1)
        // Read whole, the target and every field are the text's own.
        let request = try #require(whole.requests.first)
        #expect(request.target == text.split(separator: " ")[1].description)
        let expected = expectedFields(text)
        #expect(request.headers.fields.map(\.name) == expected.map(\.name))
        #expect(request.headers.fields.map(\.value) == expected.map(\.value))
        for cut in 1..<bytes.count {
            let split = parse([Array(bytes[..<cut]), Array(bytes[cut...])])
            #expect(split.error == nil, "cut at \(cut)")
            #expect(split.requests == whole.requests, "cut at \(cut)")
        }
        let byteByByte = parse(bytes.map { [$0] })
        #expect(byteByByte.requests == whole.requests)
    }

    @Test func chunkedAndLengthBodiesAreDecoded() throws {
        #expect(parse(validRequests[2]).requests.first?.body == Array("{\"a\":[1,2]}".utf8))
        #expect(parse(validRequests[3]).requests.first?.body == Array("hello world".utf8))
    }

    @Test func pipelinedRequestsComeBackInOrder() {
        let all = validRequests.joined()
        let output = parse(all)
        #expect(output.error == nil)
        #expect(output.requests.map(\.target) == ["/", "/healthz?x=1&y=%20", "/api/things", "/x", "/index.html", "/a/b", "/caf%C3%A9"])
        let bytes = Array(all.utf8)
        for cut in stride(from: 1, to: bytes.count, by: 7) {
            #expect(parse([Array(bytes[..<cut]), Array(bytes[cut...])]).requests.map(\.target) == output.requests.map(\.target))
        }
    }

    @Test func keepAliveFollowsVersionAndConnection() {
        let output = parse(
            "GET /a HTTP/1.0\r\n\r\n")
        #expect(output.requests.first?.keepAlive == false)
        #expect(parse("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").requests.first?.keepAlive == true)
        #expect(parse("GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").requests.first?.keepAlive == false)
    }

    @Test func headLimitYields431() {
        let limits = HTTPParserLimits(maxHeadBytes: 256, maxBodyBytes: 1024)
        let big = "GET / HTTP/1.1\r\nHost: a\r\nX: \(String(repeating: "a", count: 400))\r\n\r\n"
        #expect(parse(big, limits: limits).error?.status == .headerFieldsTooLarge)
        let longURL = "GET /\(String(repeating: "u", count: 400)) HTTP/1.1\r\nHost: t\r\n\r\n"
        #expect(parse(longURL, limits: limits).error?.status == .headerFieldsTooLarge)
        let many = "GET / HTTP/1.1\r\nHost: t\r\n" + String(repeating: "A: b\r\n", count: 60) + "\r\n"
        #expect(parse(many, limits: limits).error?.status == .headerFieldsTooLarge)
        // Split byte by byte, the limit still trips.
        #expect(parse(Array(big.utf8).map { [$0] }, limits: limits).error?.status == .headerFieldsTooLarge)
        #expect(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n", limits: limits).error == nil)
    }

    @Test func bodyLimitYields413() {
        let limits = HTTPParserLimits(maxHeadBytes: 1024, maxBodyBytes: 10)
        #expect(parse("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n", limits: limits).error?.status == .payloadTooLarge)
        let chunked = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\nghijkl\r\n0\r\n\r\n"
        #expect(parse(chunked, limits: limits).error?.status == .payloadTooLarge)
        #expect(parse("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789", limits: limits).requests.count == 1)
    }

    @Test(arguments: [
        "GET\r\n\r\n",
        "GET / HTTP/1.1 extra\r\n\r\n",
        "GET /  HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET / HTTX/1.1\r\n\r\n",
        " / HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: t\r\nBad Header: x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: t\r\nNoColon\r\n\r\n",
        "\u{1}GET / HTTP/1.1\r\nHost: t\r\n\r\n",
    ])
    func malformedRequestsAreRejected(_ text: String) {
        let output = parse(text)
        #expect(output.error != nil, "accepted: \(text.debugDescription)")
        #expect(output.requests.isEmpty)
    }

    @Test(arguments: ["zz", "-1", "1x", "ffffffffffffffffff"])
    func badChunkSizesYield400(_ size: String) {
        let text = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nabc\r\n0\r\n\r\n"
        #expect(parse(text).error?.status.code == 400 || parse(text).error?.status == .payloadTooLarge)
        #expect(parse(text).requests.isEmpty)
    }

    @Test(arguments: ["XX", "\n\n", "\r\r", "\n", "!!\r\n"])
    func chunkDataNotFollowedByCRLFYields400(_ terminator: String) {
        let text = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\(terminator)0\r\n\r\n"
        let bytes = Array(text.utf8)
        // Whole, and split at every byte: the terminator may arrive apart from the data.
        let splits = [[bytes]] + (1..<bytes.count).map { [Array(bytes[..<$0]), Array(bytes[$0...])] }
        for pieces in splits {
            let output = parse(pieces)
            #expect(output.error?.status == .badRequest, "accepted \(terminator.debugDescription) split at \(pieces[0].count)")
            #expect(output.requests.isEmpty)
        }
        #expect(parse(bytes.map { [$0] }).error?.status == .badRequest)
    }

    @Test func chunkTerminatorsSplitAnywhereAreAccepted() {
        let text = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;x=y\r\n!\r\n0\r\n\r\n"
            + "GET /next HTTP/1.1\r\nHost: t\r\n\r\n"
        let bytes = Array(text.utf8)
        for cut in 1..<bytes.count {
            let output = parse([Array(bytes[..<cut]), Array(bytes[cut...])])
            #expect(output.error == nil, "refused when split at \(cut)")
            #expect(output.requests.map(\.body) == [Array("hello!".utf8), []])
        }
        #expect(parse(bytes.map { [$0] }).requests.map(\.target) == ["/", "/next"])
    }

    @Test func smugglingShapesAreRejected() {
        let both = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        #expect(parse(both).error?.status == .badRequest)
        let bothReversed = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
        #expect(parse(bothReversed).error?.status == .badRequest)
        let twoLengths = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"
        #expect(parse(twoLengths).error?.status == .badRequest)
        let sameTwice = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"
        #expect(parse(sameTwice).error?.status == .badRequest)
        let badLength = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5x\r\n\r\nhello"
        #expect(parse(badLength).error?.status == .badRequest)
        let gzip = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
        #expect(parse(gzip).error?.status == .notImplemented)
        let doubleChunked = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"
        #expect(parse(doubleChunked).error?.status == .badRequest)
    }

    @Test func versionsOtherThan1xYield505() {
        #expect(parse("GET / HTTP/2.0\r\n\r\n").error?.status == .versionNotSupported)
        #expect(parse("GET / HTTP/0.9\r\n\r\n").error?.status == .versionNotSupported)
    }

    @Test func unknownMethodYields400() {
        #expect(parse("BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n").error?.status == .badRequest)
        #expect(parse("QUERY / HTTP/1.1\r\nHost: t\r\n\r\n").error?.status == .badRequest)
    }

    /// Found by fuzzing: http-parser refuses "G1" as a method at the "1", the strict scanner only
    /// at a bad byte after it. Fed whole, the scanner's 400 came first; fed a byte at a time, the
    /// parser's. The refusal at the earlier byte now wins however the stream is split.
    @Test(arguments: [
        ("G1\0\0\0\0\0\0\0\u{1D}: a\r\n\r\n", HTTPStatus.badRequest),
        ("G1 / HTTP/1.1\r\nHost: t\r\nBad Name: x\r\n\r\n", .badRequest),
        ("GET\0 / HTTP/1.1\r\nHost: t\r\n\r\n", .badRequest),
        ("POST / HTTP/q.1\r\n\r\n", .badRequest),
        ("GET / HTTP/1.1\r\nHost: t\r\nA: \u{1}\r\n\r\n", .badRequest),
    ])
    func theErrorDoesNotDependOnTheSplit(_ text: String, _ status: HTTPStatus) {
        let bytes = Array(text.utf8)
        let whole = parse([bytes])
        #expect(whole.error?.status == status)
        #expect(parse(bytes.map { [$0] }).error == whole.error, "a byte at a time")
        for cut in 1..<bytes.count {
            #expect(parse([Array(bytes[..<cut]), Array(bytes[cut...])]).error == whole.error, "cut at \(cut)")
        }
    }

    /// Found by fuzzing: every trailer field but the last was merged into the request's headers,
    /// so a trailer could add a Content-Length to a chunked request after the framing checks.
    @Test func trailerFieldsStayOutOfTheHeaders() throws {
        let text = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "3\r\nabc\r\n0\r\nContent-Length: 4\r\nHost: trailer\r\nX: y\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n"
        let output = parse(text)
        #expect(output.error == nil)
        #expect(output.requests.count == 2)
        let request = try #require(output.requests.first)
        #expect(request.headers.fields.map(\.name) == ["Host", "Transfer-Encoding"])
        #expect(request.headers["Host"] == "t")
        #expect(request.body == Array("abc".utf8))
        #expect(output.requests.last?.headers["Host"] == "a")
    }

    @Test func anErrorIsFinal() {
        let parser = HTTPRequestParser()
        #expect(parser.parse(Array("GET / HTTP/2.0\r\n\r\n".utf8)).error != nil)
        let after = parser.parse(Array("GET / HTTP/1.1\r\nHost: t\r\n\r\n".utf8))
        #expect(after.requests.isEmpty)
        #expect(after.error?.status == .versionNotSupported)
    }

    @Test func phaseTracksTheMessage() {
        let parser = HTTPRequestParser()
        #expect(parser.phase == .idle)
        _ = parser.parse(Array("GET / HT".utf8))
        #expect(parser.phase == .head)
        _ = parser.parse(Array("TP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nab".utf8))
        #expect(parser.phase == .body)
        _ = parser.parse(Array("c".utf8))
        #expect(parser.phase == .idle)
    }

    @Test func upgradeHandsBackTheRest() {
        let text = "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\u{81}\u{80}rest"
        let output = parse(text)
        #expect(output.requests.first?.isUpgrade == true)
        #expect(output.upgradeRemainder == Array("\u{81}\u{80}rest".utf8))
    }

    /// A published body, split between reads at every byte, chunked or not, reaches the handler
    /// whole, and compacts to the publisher's bytes less whitespace: digits, order and escapes kept.
    @Test func aJSONBodySplitAnywhereCompactsToThePublishersBytes() throws {
        let compact = #"{"id":123456789012345678,"n":9007199254740993,"Z":2,"a":1,"f":1.10,"big":1e400,"neg":-0.0,"s":"\u00e9\n\/x"}"#
        let sent = " { \"id\" : 123456789012345678 ,\n\"n\":9007199254740993,\"Z\":2, \"a\":1,\"f\":1.10,\"big\":1e400,\"neg\":-0.0,\"s\":\"\\u00e9\\n\\/x\"}\r\n"
        let body = Array(sent.utf8)
        let chunked = Array("\(String(body.count, radix: 16))\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8)
        let requests = [
            Array("POST /api/topics/t/messages HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body,
            Array("POST /api/topics/t/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8) + chunked,
        ]
        for bytes in requests {
            for cut in 1..<bytes.count {
                let output = parse([Array(bytes[..<cut]), Array(bytes[cut...])])
                #expect(output.error == nil, "cut at \(cut)")
                let request = try #require(output.requests.first, "cut at \(cut)")
                #expect(request.body == body, "cut at \(cut)")
                #expect(try JSONParser.compact(request.body) == Array(compact.utf8), "cut at \(cut)")
            }
        }
    }

    /// RFC 9112, section 3.2.2: a target in absolute form is read as the path and query it
    /// names; any other target stays as it is.
    @Test(arguments: [
        ("http://a.example/x/y?q=1", "/x/y?q=1"), ("HTTPS://a.example:8443", "/"), ("http://a.example?q", "/?q"),
        ("/plain?http://x/", "/plain?http://x/"), ("*", "*"), ("ftp://a/x", "ftp://a/x"), ("http:/x", "http:/x"),
    ])
    func aTargetInAbsoluteFormIsReadAsItsPath(target: String, expected: String) throws {
        let output = parse("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
        if let request = output.requests.first { #expect(request.target == expected) }
        #expect(HTTPRequest.originForm(target) == expected)
    }

    /// `Expect: 100-continue` on an HTTP/1.1 request with a body to come is awaited until its body
    /// has come, or the gateway has sent the 100; never for HTTP/1.0 or a request without a body.
    @Test func aRequestExpectingContinueIsAwaitedUntilItsBodyComes() {
        let parser = HTTPRequestParser(limits: HTTPParserLimits())
        _ = parser.parse(Array("POST /t HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\n".utf8))
        #expect(parser.awaitsContinue)
        parser.continueSent()
        #expect(!parser.awaitsContinue)
        #expect(parser.parse(Array("body".utf8)).requests.count == 1)
        _ = parser.parse(Array("PUT /t HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        #expect(parser.awaitsContinue)
        #expect(parser.parse(Array("1\r\nx\r\n0\r\n\r\n".utf8)).requests.count == 1)
        #expect(!parser.awaitsContinue)
        for head in [
            "POST /t HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
            "GET /t HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n",
        ] {
            let fresh = HTTPRequestParser(limits: HTTPParserLimits())
            _ = fresh.parse(Array(head.utf8))
            #expect(!fresh.awaitsContinue, "\(head)")
        }
    }
}
