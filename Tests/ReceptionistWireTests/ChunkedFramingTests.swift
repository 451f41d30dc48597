import Testing
@testable import ReceptionistWire

/// The strict reading of a chunked body, fed whole and a byte at a time.
@Suite struct ChunkedFramingTests {
    private func read(_ text: String, byteAtATime: Bool = false) -> (accepted: Bool, done: Bool) {
        var framing = ChunkedFraming()
        let bytes = Array(text.utf8)
        let pieces = byteAtATime ? bytes.map { [$0] } : [bytes]
        for piece in pieces {
            guard piece.withUnsafeBytes({ framing.take($0) }) else { return (false, false) }
        }
        return (true, framing.isDone)
    }

    @Test(arguments: [
        "0\r\n\r\n",
        "5\r\nhello\r\n0\r\n\r\n",
        "A\r\n0123456789\r\n0\r\n\r\n",
        "0005\r\nhello\r\n0\r\n\r\n",
        "2;name=value\r\n{}\r\n0\r\n\r\n",
        "2 ;name\r\n{}\r\n0;last\r\n\r\n",
        "2\r\n\r\n\r\n0\r\nTrailer: x\r\nOther:\ty\r\n\r\n",
        "0\r\nTrailer: x\n\n",
    ])
    func wholeBodiesAreDone(_ text: String) {
        #expect(read(text) == (true, true), "\(text.debugDescription)")
        #expect(read(text, byteAtATime: true) == (true, true), "\(text.debugDescription), a byte at a time")
    }

    /// Shapes http-parser as packaged takes: a byte after a CR read as its LF, a space or a
    /// control byte where an extension goes.
    @Test(arguments: [
        "2\rX{}\r\n0\r\n\r\n",
        "2;a\rX{}\r\n0\r\n\r\n",
        "0\rX\r\n",
        "0\r\n\rX",
        "2 \r\n{}\r\n0\r\n\r\n",
        "2;\u{1}\r\n{}\r\n0\r\n\r\n",
        "2\r\n{}XX0\r\n\r\n",
        "2\r\n{}\n0\r\n\r\n",
        "\r\n",
        ";x\r\n",
        "g\r\n",
        "0\r\nTrailer: \u{1}\r\n\r\n",
        "0\r\nTrailer: x\rY\r\n\r\n",
        "0\r\n\r\nX",
        "11111111111111111\r\n",
        "0\n",
    ])
    func malformedFramingIsRefused(_ text: String) {
        #expect(!read(text).accepted, "\(text.debugDescription)")
        #expect(!read(text, byteAtATime: true).accepted, "\(text.debugDescription), a byte at a time")
    }

    @Test func aBodyCutShortIsNotDone() {
        for text in ["5\r\nhel", "5\r\nhello\r\n", "0\r\n", "0\r\nTrailer: x\r\n", "0\r\n\r"] {
            #expect(read(text) == (true, false), "\(text.debugDescription)")
        }
    }
}
