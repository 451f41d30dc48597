import Testing

@testable import receptionist_bench

@Suite struct ResponseHeadTests {
    @Test func pipelinedHeadsAreFoundFromWhereEachStarts() {
        let one = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
        let bytes = Array((one + one + "HTTP/1.1 202 Acc").utf8)
        #expect(ResponseHead.end(in: bytes, from: 0) == 34)
        #expect(ResponseHead.end(in: bytes, from: 40) == 74)
        // The third head is not all here yet.
        #expect(ResponseHead.end(in: bytes, from: 80) == nil)
        #expect(ResponseHead.end(in: Array("\r\n\r".utf8), from: 0) == nil)
    }

    @Test func aHeadSplitsIntoItsLinesAndAFieldIsFoundInAnyCaseTrimmed() {
        let bytes = Array("xxHTTP/1.1 101 Switching\r\nUpgrade: websocket\r\ncontent-LENGTH:   17  \r\nX: 1\r\n\r\n".utf8)
        let end = ResponseHead.end(in: bytes, from: 2)!
        let lines = ResponseHead.lines(in: bytes, from: 2, to: end)
        #expect(lines.map { String(decoding: bytes[$0], as: UTF8.self) }
            == ["HTTP/1.1 101 Switching", "Upgrade: websocket", "content-LENGTH:   17  ", "X: 1"])
        #expect(ResponseHead.line(lines[0], of: bytes, startsWith: "http/1.1 101"))
        #expect(!ResponseHead.line(lines[0], of: bytes, startsWith: "http/1.1 2"))
        #expect(ResponseHead.value(of: "content-length:", in: bytes, lines: lines.dropFirst()) == "17")
        #expect(ResponseHead.value(of: "upgrade:", in: bytes, lines: lines.dropFirst()) == "websocket")
        #expect(ResponseHead.value(of: "x-missing:", in: bytes, lines: lines.dropFirst()) == nil)
        // A field name is matched whole with its colon, not as a prefix of a longer name.
        #expect(ResponseHead.value(of: "x:", in: bytes, lines: lines.dropFirst()) == "1")
        #expect(ResponseHead.value(of: "upgrade-insecure:", in: bytes, lines: lines.dropFirst()) == nil)
    }
}
