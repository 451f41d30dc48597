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

@Suite struct ResponseHeadAnswerTests {
    @Test func pipelinedResponsesAreMeasuredByTheirContentLengthAndStatus() {
        let ok = "HTTP/1.1 200 OK\r\nDate: x\r\ncontent-LENGTH:  2 \r\n\r\n{}"
        let refused = "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 5\r\n\r\n{...}"
        let empty = "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n"
        let bytes = Array((ok + refused + empty).utf8)
        let first = ResponseHead.response(in: bytes, from: 0)
        #expect(first?.length == ok.utf8.count && first?.success == true)
        let second = ResponseHead.response(in: bytes, from: ok.utf8.count)
        #expect(second?.length == refused.utf8.count && second?.success == false)
        let third = ResponseHead.response(in: bytes, from: ok.utf8.count + refused.utf8.count)
        #expect(third?.length == empty.utf8.count && third?.success == true, "no Content-Length: no body")
    }

    @Test func aResponseNotAllHereIsNotMeasured() {
        let whole = Array("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd".utf8)
        for cut in 0..<whole.count {
            #expect(ResponseHead.response(in: Array(whole[..<cut]), from: 0) == nil, "cut at \(cut)")
        }
        #expect(ResponseHead.response(in: whole, from: 0)?.length == whole.count)
    }

    @Test func aContentLengthThatIsNotANumberCountsNoBody() {
        for value in ["", "x", "1 2", "-1", "99999999999999999999"] {
            let text = "HTTP/1.1 200 OK\r\nContent-Length: \(value)\r\n\r\n"
            #expect(ResponseHead.response(in: Array(text.utf8), from: 0)?.length == text.utf8.count, "\(value)")
        }
        // A field whose name only starts like it is another field.
        let other = "HTTP/1.1 200 OK\r\nContent-Length-X: 3\r\n\r\n"
        #expect(ResponseHead.response(in: Array(other.utf8), from: 0)?.length == other.utf8.count)
    }
}
