import Testing
@testable import ReceptionistWire

/// One Autobahn TestSuite behaviour (cases 1-7, 9 and 10, server side): a client byte stream and
/// what the decoder must make of it.
struct ConformanceCase: Sendable, CustomTestStringConvertible {
    let id: String
    let stream: [UInt8]
    let expected: [WebSocketMessage]
    /// The close code the connection must fail with, or nil when the stream is fine.
    let failsWith: UInt16?

    var testDescription: String { id }
}

private func ok(_ id: String, _ stream: [UInt8], _ expected: [WebSocketMessage]) -> ConformanceCase {
    ConformanceCase(id: id, stream: stream, expected: expected, failsWith: nil)
}

private func fails(_ id: String, _ stream: [UInt8], _ code: UInt16, after expected: [WebSocketMessage] = []) -> ConformanceCase {
    ConformanceCase(id: id, stream: stream, expected: expected, failsWith: code)
}

private func hex(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    var digits = text.utf8.makeIterator()
    while let high = digits.next(), let low = digits.next() {
        out.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
    }
    return out
}

/// A text message sent one byte per fragment, as Autobahn does in 6.2 and 6.6.
private func textPerByte(_ payload: [UInt8]) -> [UInt8] {
    guard payload.count > 1 else { return client(.text, payload) }
    var stream = client(.text, [payload[0]], fin: false)
    for byte in payload.dropFirst().dropLast() { stream += client(.continuation, [byte], fin: false) }
    return stream + client(.continuation, [payload[payload.count - 1]])
}

private let p1002 = WebSocketCloseCode.protocolError
private let p1007 = WebSocketCloseCode.invalidPayload
private let hello = Array("Hello, world!".utf8)
private let kosme = hex("cebae1bdb9cf83cebcceb5")

private let framing: [ConformanceCase] = [0, 125, 126, 127, 128, 65535, 65536].flatMap { length in
    let text = String(repeating: "*", count: length)
    let data = [UInt8](repeating: 0xFE, count: length)
    return [ok("1.1 text of \(length)", client(.text, text), [.text(text)]), ok("1.2 binary of \(length)", client(.binary, data), [.binary(data)])]
}

private let pings: [ConformanceCase] = [
    ok("2.1 ping without payload", client(.ping, []), [.ping([])]),
    ok("2.2 ping with text", client(.ping, hello), [.ping(hello)]),
    ok("2.3 ping with binary", client(.ping, [0, 0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0, 0xFF]), [.ping([0, 0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0, 0xFF])]),
    ok("2.4 ping of 125", client(.ping, [UInt8](repeating: 0xFE, count: 125)), [.ping([UInt8](repeating: 0xFE, count: 125))]),
    fails("2.5 ping of 126", client(.ping, [UInt8](repeating: 0xFE, count: 126)), p1002),
    ok("2.7 unsolicited pong", client(.pong, []), [.pong([])]),
    ok("2.8 unsolicited pong with payload", client(.pong, Array("unsolicited".utf8)), [.pong(Array("unsolicited".utf8))]),
    ok("2.10 ten pings", (0..<10).flatMap { client(.ping, [UInt8($0)]) }, (0..<10).map { .ping([UInt8($0)]) }),
]

private let reservedBits: [ConformanceCase] = [
    fails("3.1 RSV1 on text", rawFrame(0x1, hello, rsv: 1), p1002),
    fails("3.2 RSV2 after a good text", client(.text, hello) + rawFrame(0x1, hello, rsv: 2), p1002, after: [.text("Hello, world!")]),
    fails("3.3 RSV3 between two texts", client(.text, hello) + rawFrame(0x1, hello, rsv: 3) + client(.ping, []), p1002, after: [.text("Hello, world!")]),
    fails("3.5 RSV5 on binary", rawFrame(0x2, [0xFF], rsv: 5), p1002),
    fails("3.6 RSV6 on ping", rawFrame(0x9, hello, rsv: 6), p1002),
    fails("3.7 RSV7 on close", rawFrame(0x8, [0x03, 0xE8], rsv: 7), p1002),
]

private let opcodes: [ConformanceCase] = [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF].map { (op: UInt8) in
    fails("4 reserved opcode \(op) after a text", client(.text, hello) + rawFrame(op, [1, 2]) + client(.ping, []), p1002, after: [.text("Hello, world!")])
}

private let fragmentation: [ConformanceCase] = [
    fails("5.1 fragmented ping", rawFrame(0x9, Array("frag".utf8), fin: false) + client(.continuation, "ment"), p1002),
    fails("5.2 fragmented pong", rawFrame(0xA, Array("frag".utf8), fin: false) + client(.continuation, "ment"), p1002),
    ok("5.3 text in two fragments", client(.text, "frag", fin: false) + client(.continuation, "ment1"), [.text("fragment1")]),
    ok("5.6 ping between fragments", client(.text, "frag", fin: false) + client(.ping, "ping") + client(.continuation, "ment"),
       [.ping(Array("ping".utf8)), .text("fragment")]),
    fails("5.9 continuation first", client(.continuation, "x", fin: false) + client(.text, "x"), p1002),
    fails("5.12 final continuation first", client(.continuation, "x") + client(.text, "x"), p1002),
    fails("5.15 continuation after a finished message",
          client(.text, "a", fin: false) + client(.continuation, "b") + client(.continuation, "c", fin: false) + client(.continuation, "d"),
          p1002, after: [.text("ab")]),
    fails("5.18 text inside a text", client(.text, "a", fin: false) + client(.text, "b"), p1002),
    ok("5.19 pings inside a five-fragment message",
       client(.text, "f1", fin: false) + client(.continuation, "f2", fin: false) + client(.ping, "p1")
           + client(.continuation, "f3", fin: false) + client(.continuation, "f4", fin: false) + client(.ping, "p2")
           + client(.continuation, "f5"),
       [.ping(Array("p1".utf8)), .ping(Array("p2".utf8)), .text("f1f2f3f4f5")]),
    ok("6.1 empty fragments", client(.text, [], fin: false) + client(.continuation, [], fin: false) + client(.continuation, []), [.text("")]),
]

/// Autobahn 6.5-6.23: (bytes, valid) sent as one text frame and one byte per fragment.
private let utf8Samples: [(String, Bool)] = [
    ("cebae1bdb9cf83cebcceb5", true), ("cebae1bdb9cf83cebcceb5eda080656469746564", false),
    ("00", true), ("c280", true), ("e0a080", true), ("f0908080", true),  // 6.7 first of each length
    ("f888808080", false), ("fc8480808080", false),  // 6.8 five and six bytes
    ("7f", true), ("dfbf", true), ("efbfbf", true), ("f48fbfbf", true),  // 6.9 last of each length
    ("f7bfbfbf", false), ("fbbfbfbfbf", false), ("fdbfbfbfbfbf", false),  // 6.10
    ("ed9fbf", true), ("ee8080", true), ("efbfbd", true), ("f4908080", false),  // 6.11 boundaries
    ("80", false), ("bf", false), ("80bf80bf", false),  // 6.12 stray continuations
    ("c020", false), ("e020", false), ("f020", false), ("f820", false), ("fc20", false),  // 6.13 lonely starts
    ("c0", false), ("e080", false), ("f08080", false), ("df", false), ("efbf", false), ("f7bfbf", false),  // 6.14 cut short
    ("c0e080f08080f8808080fc80808080dfefbff7bfbffbbfbfbffdbfbfbfbf", false),  // 6.15
    ("fe", false), ("ff", false), ("fefeffff", false),  // 6.16 impossible bytes
    ("c0af", false), ("e080af", false), ("f08080af", false), ("c1bf", false), ("e09fbf", false), ("f08fbfbf", false),  // 6.17-18 overlong
    ("c080", false), ("e08080", false), ("f0808080", false),  // 6.19 overlong NUL
    ("eda080", false), ("edadbf", false), ("edae80", false), ("edafbf", false), ("edb080", false), ("edbe80", false), ("edbfbf", false),  // 6.20
    ("eda080edb080", false), ("edafbfedbfbf", false),  // 6.21 paired surrogates
    ("efbfbe", true), ("efbfbf", true), ("f09fbfbe", true), ("f48fbfbf", true), ("efb790", true),  // 6.22 noncharacters are valid
    ("efbfbd", true),  // 6.23
]

private let utf8: [ConformanceCase] = utf8Samples.flatMap { sample, valid in
    let payload = hex(sample)
    guard valid else {
        return [fails("6 \(sample) invalid, one frame", client(.text, payload), p1007),
                fails("6 \(sample) invalid, a fragment per byte", textPerByte(payload), p1007)]
    }
    let text = String(decoding: payload, as: UTF8.self)
    return [ok("6 \(sample), one frame", client(.text, payload), [.text(text)]),
            ok("6 \(sample), a fragment per byte", textPerByte(payload), [.text(text)])]
}

private let closing: [ConformanceCase] = [
    ok("7.1.1 text then close", client(.text, hello) + client(.close, [0x03, 0xE8]), [.text("Hello, world!"), .close(code: 1000, reason: "")]),
    ok("7.1.2 a second close is ignored", client(.close, [0x03, 0xE8]) + client(.close, [0x03, 0xE8]), [.close(code: 1000, reason: "")]),
    ok("7.1.3 a ping after close is ignored", client(.close, []) + client(.ping, "x"), [.close(code: nil, reason: "")]),
    ok("7.1.5 close inside a fragmented message", client(.text, "frag", fin: false) + client(.close, [0x03, 0xE8]) + client(.continuation, "x"),
       [.close(code: 1000, reason: "")]),
    ok("7.3.1 close without payload", client(.close, []), [.close(code: nil, reason: "")]),
    fails("7.3.2 close with 1 byte", client(.close, [0x03]), p1002),
    ok("7.3.3 close with a code", client(.close, [0x03, 0xE8]), [.close(code: 1000, reason: "")]),
    ok("7.3.4 close with a code and reason", client(.close, [0x03, 0xE8] + Array("Hello World!".utf8)), [.close(code: 1000, reason: "Hello World!")]),
    ok("7.3.5 close with a 123-byte reason", client(.close, [0x03, 0xE8] + [UInt8](repeating: 0x2A, count: 123)),
       [.close(code: 1000, reason: String(repeating: "*", count: 123))]),
    fails("7.3.6 close with a 124-byte reason", client(.close, [0x03, 0xE8] + [UInt8](repeating: 0x2A, count: 124)), p1002),
    fails("7.5.1 close reason not UTF-8", client(.close, [0x03, 0xE8] + hex("cebae1bdb9cf83cebcceb5eda080656469746564")), p1007),
] + [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999].map { (code: UInt16) in
    ok("7.7 close code \(code)", client(.close, [UInt8(code >> 8), UInt8(code & 0xFF)]), [.close(code: code, reason: "")])
} + [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999].map { (code: UInt16) in
    fails("7.9 close code \(code)", client(.close, [UInt8(code >> 8), UInt8(code & 0xFF)]), p1002)
}

@Suite struct WebSocketDecoderConformanceTests {
    @Test(arguments: framing + pings + reservedBits + opcodes + fragmentation + utf8 + closing)
    func behavesAsAutobahnExpects(_ scenario: ConformanceCase) {
        let whole = decode(scenario.stream)
        #expect(whole.messages == scenario.expected)
        #expect(whole.error?.closeCode == scenario.failsWith)
        #expect(decode(scenario.stream.map { [$0] }) == whole, "byte by byte")
        if scenario.stream.count <= 300 {
            for cut in 1..<scenario.stream.count {
                #expect(decode(halves(scenario.stream, at: cut)) == whole, "cut at \(cut)")
            }
        }
    }

    @Test func ping125InOneByteChops() {  // 2.6
        let payload = (0..<125).map { UInt8($0) }
        #expect(decode(client(.ping, payload).map { [$0] }) == Decoded(messages: [.ping(payload)]))
    }

    @Test func textOf65536InChopsOf997() {  // 1.1.8
        let text = String(repeating: "*", count: 65536)
        let stream = client(.text, text)
        let chops = stride(from: 0, to: stream.count, by: 997).map { Array(stream[$0..<min($0 + 997, stream.count)]) }
        #expect(decode(chops) == Decoded(messages: [.text(text)]))
    }

    @Test func invalidUTF8FailsFastInsideAFragmentedMessage() {  // 6.4.1 and 6.4.2
        // The second fragment breaks the text; the third never needs to arrive.
        let first = client(.text, Array(kosme.prefix(11)), fin: false)
        #expect(decode(first + client(.continuation, hex("f4908080"), fin: false)).error?.closeCode == p1007)
        // Broken inside a code point: F4 alone could still be fine, F4 90 cannot.
        #expect(decode(first + client(.continuation, hex("f4"), fin: false)).error == nil)
        #expect(decode(first + client(.continuation, hex("f4"), fin: false) + client(.continuation, hex("90"), fin: false)).error?.closeCode == p1007)
    }

    @Test func invalidUTF8FailsFastInsideOneFrame() {  // 6.4.3 and 6.4.4
        let payload = kosme + hex("f4908080") + Array("edited".utf8)
        let frame = client(.text, payload)
        let header = frame.count - payload.count
        // The frame arrives in three chops; the one that carries F4 90 is enough to fail.
        var decoder = WebSocketDecoder()
        let start = decoder.decode(Array(frame[..<(header + 11)]))
        let middle = decoder.decode(Array(frame[(header + 11)..<(header + 13)]))
        #expect(start.error == nil)
        #expect(middle.error?.closeCode == p1007)
    }

    @Test func tenThousandSmallMessagesInOneBuffer() {  // 9.7, 9.8 in spirit
        var stream: [UInt8] = []
        for index in 0..<10_000 { stream += index % 2 == 0 ? client(.text, "m\(index)") : client(.binary, [UInt8(index & 0xFF)]) }
        let decoded = decode(stream)
        #expect(decoded.error == nil)
        #expect(decoded.messages.count == 10_000)
        #expect(decoded.messages[9_998] == .text("m9998"))
        #expect(decoded.messages[9_999] == .binary([UInt8(9_999 & 0xFF)]))
    }

    @Test func largeMessagesUnderARaisedLimit() {  // 9.1-9.6 at 1 MiB
        let limit = 1 << 20
        let text = String(repeating: "κόσμε ", count: limit / 12)
        let single = client(.text, text)
        let chops = stride(from: 0, to: single.count, by: 4096).map { Array(single[$0..<min($0 + 4096, single.count)]) }
        #expect(decode(chops, maxMessageBytes: limit) == Decoded(messages: [.text(text)]))
        let data = (0..<limit).map { UInt8(truncatingIfNeeded: $0) }
        var fragmented = client(.binary, Array(data[..<256]), fin: false)
        for start in stride(from: 256, to: limit - 256, by: 256) { fragmented += client(.continuation, Array(data[start..<(start + 256)]), fin: false) }
        fragmented += client(.continuation, Array(data[(limit - 256)...]))
        #expect(decode(fragmented, maxMessageBytes: limit) == Decoded(messages: [.binary(data)]))
        // One byte more than the limit fails with 1009, on the header of the fragment that crosses it.
        let lastFrame = client(.continuation, Array(data[(limit - 256)...]))
        #expect(lastFrame.count == 8 + 256)
        let allButLast = Array(fragmented.dropLast(lastFrame.count))
        #expect(decode(allButLast, maxMessageBytes: limit) == Decoded())
        let crossing = client(.continuation, Array(data[(limit - 256)...]) + [0])
        let decoded = decode(allButLast + crossing.prefix(4), maxMessageBytes: limit)
        #expect(decoded.messages.isEmpty)
        #expect(decoded.error?.closeCode == WebSocketCloseCode.messageTooBig)
    }

    @Test func autoFragmentedMessageAtTheDefaultLimit() {  // 10.1.1
        let text = String(repeating: "*", count: 65536)
        let utf8 = Array(text.utf8)
        var stream: [UInt8] = []
        for start in stride(from: 0, to: utf8.count, by: 1300) {
            let end = min(start + 1300, utf8.count)
            stream += client(start == 0 ? .text : .continuation, Array(utf8[start..<end]), fin: end == utf8.count)
        }
        #expect(decode(stream) == Decoded(messages: [.text(text)]))
        #expect(decode(stream + client(.text, "x", fin: false) + client(.continuation, utf8)).error?.closeCode == WebSocketCloseCode.messageTooBig)
    }
}
