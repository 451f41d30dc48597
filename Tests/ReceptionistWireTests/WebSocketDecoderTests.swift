import Testing
@testable import ReceptionistWire

private let protocolError = WebSocketCloseCode.protocolError
private let invalidPayload = WebSocketCloseCode.invalidPayload
private let messageTooBig = WebSocketCloseCode.messageTooBig

/// Streams that must decode the same whatever the split, with what they decode to.
private let splitCases: [(name: String, stream: [UInt8], role: WebSocketDecoder.Role, expected: [WebSocketMessage])] = [
    ("rfc masked text", [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58], .server, [.text("Hello")]),
    ("rfc fragmented text", [0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F], .client, [.text("Hello")]),
    (
        "fragments around a ping, multi-byte text across fragments, close",
        concat(
            client(.text, [0xCE, 0xBA, 0xE1], fin: false), client(.ping, "p"),
            client(.continuation, [0xBD, 0xB9, 0xCF], fin: false), client(.continuation, [0x83, 0xCE, 0xBC, 0xCE, 0xB5]),
            client(.binary, [0, 1, 2, 255]), client(.pong, []), client(.close, [0x03, 0xE8, 0x6F, 0x6B])),
        .server,
        [.ping(Array("p".utf8)), .text("κόσμε"), .binary([0, 1, 2, 255]), .pong([]), .close(code: 1000, reason: "ok")]
    ),
    (
        "empty frames and non-minimal lengths",
        concat(
            client(.text, ""), client(.binary, [], fin: false), client(.continuation, [], fin: false),
            client(.continuation, [9]), rawFrame(0x1, Array("abc".utf8), length: .sixteenBit),
            rawFrame(0x2, [1, 2], length: .sixtyFourBit), rawFrame(0x9, [7], length: .sixteenBit)),
        .server,
        [.text(""), .binary([9]), .text("abc"), .binary([1, 2]), .ping([7])]
    ),
    (
        "a 300-byte masked text in three fragments",
        concat(
            client(.text, String(repeating: "é", count: 50), fin: false),
            client(.continuation, String(repeating: "z", count: 100), fin: false),
            client(.continuation, String(repeating: "€", count: 33) + "!")),
        .server,
        [.text(String(repeating: "é", count: 50) + String(repeating: "z", count: 100) + String(repeating: "€", count: 33) + "!")]
    ),
    (
        "an error after a message",
        concat(client(.text, "ok"), client(.binary, [1]), rawFrame(0x1, [0x41, 0xFF, 0x42])),
        .server,
        [.text("ok"), .binary([1])]
    ),
]

@Suite struct WebSocketDecoderTests {
    // MARK: - RFC 6455 section 5.7 examples

    @Test func rfcSingleFrameMaskedText() {
        #expect(decode([0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]) == Decoded(messages: [.text("Hello")]))
    }

    @Test func rfcUnmaskedFramesInClientRole() {
        #expect(decode([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F], role: .client).messages == [.text("Hello")])
        #expect(decode([0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F], role: .client).messages == [.text("Hello")])
        #expect(decode([0x89, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F], role: .client).messages == [.ping(Array("Hello".utf8))])
    }

    @Test func rfcMaskedPong() {
        let pong: [UInt8] = [0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        #expect(decode(pong).messages == [.pong(Array("Hello".utf8))])
    }

    @Test func rfcBinaryWith16And64BitLengths() {
        let small = (0..<256).map { UInt8($0) }
        #expect(decode(concat([0x82, 0x7E, 0x01, 0x00], small), role: .client).messages == [.binary(small)])
        let large = (0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let frame = concat([0x82, 0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00], large)
        #expect(decode(frame, role: .client) == Decoded(messages: [.binary(large)]))
        #expect(decode(frame.map { [$0] }, role: .client) == Decoded(messages: [.binary(large)]))
    }

    // MARK: - Splits

    @Test(arguments: splitCases.indices)
    func everySplitDecodesTheSame(_ index: Int) {
        let (name, stream, role, expected) = splitCases[index]
        let whole = decode(stream, role: role)
        #expect(whole.messages == expected, "\(name)")
        for cut in 0...stream.count {
            #expect(decode(halves(stream, at: cut), role: role) == whole, "\(name), cut at \(cut)")
        }
        for first in stride(from: 1, to: stream.count, by: 3) {
            for second in stride(from: first, to: stream.count, by: 5) {
                let pieces = [Array(stream[..<first]), Array(stream[first..<second]), Array(stream[second...])]
                #expect(decode(pieces, role: role) == whole, "\(name), cuts at \(first) and \(second)")
            }
        }
        #expect(decode(stream.map { [$0] }, role: role) == whole, "\(name), byte by byte")
    }

    // MARK: - Round trips

    @Test(arguments: [0, 1, 125, 126, 127, 65535, 65536], [false, true])
    func encoderOutputDecodes(_ length: Int, _ masked: Bool) {
        let data = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
        let text = String(repeating: "x", count: max(0, length - 3)) + (length >= 3 ? "€" : String(repeating: "y", count: length))
        let key: UInt32? = masked ? 0xA1B2_C3D4 : nil
        let role: WebSocketDecoder.Role = masked ? .server : .client
        let stream = concat(
            WebSocketEncoder.frame(.binary, payload: data, maskKey: key), WebSocketEncoder.text(text, maskKey: key),
            WebSocketEncoder.frame(.ping, payload: data.prefix(125), maskKey: key))
        let expected = Decoded(messages: [.binary(data), .text(text), .ping(Array(data.prefix(125)))])
        #expect(decode(stream, role: role) == expected)
        #expect(decode(stream.map { [$0] }, role: role) == expected)
        #expect(decode(halves(stream, at: stream.count / 2 + 1), role: role) == expected)
    }

    // MARK: - Framing rules

    @Test(arguments: [1, 2, 4, 7] as [UInt8])
    func reservedBitsFail(_ rsv: UInt8) {
        #expect(decode(rawFrame(0x1, Array("a".utf8), rsv: rsv)).error?.closeCode == protocolError)
        #expect(decode(rawFrame(0x9, [], rsv: rsv)).error?.closeCode == protocolError)
        // Found on the first byte, before anything else arrives.
        #expect(decode([[0x80 | rsv << 4 | 0x1]]).error?.closeCode == protocolError)
    }

    @Test(arguments: [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF] as [UInt8])
    func reservedOpcodesFail(_ opcode: UInt8) {
        #expect(decode(rawFrame(opcode, [])).error == WebSocketError(closeCode: protocolError, reason: "reserved opcode"))
        #expect(decode(rawFrame(opcode, [1, 2, 3], fin: false)).error?.closeCode == protocolError)
    }

    @Test func serverRoleRequiresMaskedFrames() {
        let unmasked = rawFrame(0x1, Array("hi".utf8), mask: nil)
        #expect(decode(unmasked).error == WebSocketError(closeCode: protocolError, reason: "client frame not masked"))
        #expect(decode(unmasked, role: .client).messages == [.text("hi")])
    }

    @Test func clientRoleRejectsMaskedFrames() {
        let masked = rawFrame(0x1, Array("hi".utf8))
        #expect(decode(masked, role: .client).error == WebSocketError(closeCode: protocolError, reason: "server frame masked"))
    }

    @Test(arguments: [0x8, 0x9, 0xA] as [UInt8])
    func controlFramesOver125BytesFail(_ opcode: UInt8) {
        let ok = decode(rawFrame(opcode, [0x03, 0xE8] + [UInt8](repeating: 0x61, count: 123)))
        #expect(ok.error == nil)
        #expect(ok.messages.count == 1)
        let tooLong = rawFrame(opcode, [0x03, 0xE8] + [UInt8](repeating: 0x61, count: 124))
        #expect(decode(tooLong).error?.closeCode == protocolError)
        // Refused on the length, before the payload arrives.
        #expect(decode(Array(tooLong.prefix(4))).error?.closeCode == protocolError)
        #expect(decode(Array(tooLong.prefix(3))).error == nil)
        // A longer length form than needed is tolerated: the value is what counts.
        #expect(decode(rawFrame(opcode, [0x03, 0xE8], length: .sixteenBit)).error == nil)
        #expect(decode(rawFrame(opcode, [0x03, 0xE8], length: .sixtyFourBit)).error == nil)
    }

    @Test(arguments: [0x8, 0x9, 0xA] as [UInt8])
    func fragmentedControlFramesFail(_ opcode: UInt8) {
        let first = rawFrame(opcode, [0x03, 0xE8], fin: false)
        #expect(decode(first).error == WebSocketError(closeCode: protocolError, reason: "fragmented control frame"))
        #expect(decode(concat(client(.text, "a", fin: false), first)).error?.closeCode == protocolError)
    }

    @Test func continuationWithoutAMessageFails() {
        #expect(decode(client(.continuation, "a")).error?.closeCode == protocolError)
        #expect(decode(client(.continuation, "a", fin: false)).error?.closeCode == protocolError)
        // Also after a message has been completed.
        let after = decode(concat(client(.text, "a"), client(.continuation, "b")))
        #expect(after == Decoded(messages: [.text("a")], error: .protocolError("continuation without a message")))
    }

    @Test(arguments: [WebSocketOpcode.text, .binary], [WebSocketOpcode.text, .binary])
    func newMessageDuringAFragmentedOneFails(_ first: WebSocketOpcode, _ second: WebSocketOpcode) {
        let stream = concat(client(first, "a", fin: false), client(second, "b"))
        #expect(decode(stream).error == .protocolError("new message inside a fragmented one"))
    }

    @Test func sixtyFourBitLengthWithTopBitFails() {
        let header: [UInt8] = [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1]
        #expect(decode(header).error == .protocolError("64-bit length with the top bit set"))
        #expect(decode(header, maxMessageBytes: Int.max).error?.closeCode == protocolError)
    }

    // MARK: - Limits

    @Test func messageOverTheLimitFailsOnTheHeader() {
        #expect(decode(client(.binary, [UInt8](repeating: 1, count: 100)), maxMessageBytes: 100).error == nil)
        let big = client(.binary, [UInt8](repeating: 1, count: 101))
        #expect(decode(big, maxMessageBytes: 100).error == .messageTooBig("message over 100 bytes"))
        // The header alone is enough: nothing of the payload has to arrive.
        #expect(decode(Array(big.prefix(2)), maxMessageBytes: 100).error?.closeCode == messageTooBig)
        let huge: [UInt8] = [0x82, 0xFF, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00]
        #expect(decode(huge).error?.closeCode == messageTooBig)
    }

    @Test func fragmentsCountTowardsTheLimit() {
        let fits = concat(client(.text, String(repeating: "a", count: 60), fin: false), client(.continuation, String(repeating: "b", count: 40)))
        #expect(decode(fits, maxMessageBytes: 100).messages == [.text(String(repeating: "a", count: 60) + String(repeating: "b", count: 40))])
        let over = concat(
            client(.text, String(repeating: "a", count: 60), fin: false), client(.ping, "p"),
            client(.continuation, String(repeating: "b", count: 41)))
        let decoded = decode(over, maxMessageBytes: 100)
        #expect(decoded.messages == [.ping(Array("p".utf8))])
        #expect(decoded.error?.closeCode == messageTooBig)
        // Control frames do not count: a 125-byte ping passes a 10-byte limit.
        #expect(decode(client(.ping, [UInt8](repeating: 0, count: 125)), maxMessageBytes: 10).error == nil)
    }

    @Test func manyTinyFragmentsAssemble() {
        let text = String(repeating: "κόσμε ", count: 2000)
        let utf8 = Array(text.utf8)
        var stream = client(.text, [utf8[0]], fin: false)
        for byte in utf8.dropFirst().dropLast() { stream += client(.continuation, [byte], fin: false) }
        stream += client(.continuation, [utf8[utf8.count - 1]])
        #expect(decode(stream) == Decoded(messages: [.text(text)]))
    }

    // MARK: - UTF-8

    @Test func invalidUTF8InATextFrameFails() {
        #expect(decode(client(.text, [0x41, 0xC0, 0x80])).error == .invalidPayload("invalid UTF-8 in text"))
        #expect(decode(client(.text, [0xED, 0xA0, 0x80])).error?.closeCode == invalidPayload)
        #expect(decode(client(.text, [0xF4, 0x90, 0x80, 0x80])).error?.closeCode == invalidPayload)
        // Binary messages are not text: the same bytes pass.
        #expect(decode(client(.binary, [0x41, 0xC0, 0x80])).messages == [.binary([0x41, 0xC0, 0x80])])
    }

    @Test func invalidUTF8FailsOnTheFirstFragment() {
        // The message never ends, yet the first fragment is enough.
        #expect(decode(client(.text, [0x61, 0xFF], fin: false)).error?.closeCode == invalidPayload)
        let second = concat(client(.text, "ok", fin: false), client(.continuation, [0xED, 0xBF], fin: false))
        #expect(decode(second).error?.closeCode == invalidPayload)
    }

    @Test func invalidUTF8FailsBeforeTheFrameEnds() {
        let kosme: [UInt8] = [0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5]
        let frame = client(.text, kosme + [0xED, 0xA0, 0x80] + Array(String(repeating: "edited", count: 20).utf8))
        // An 8-byte header (16-bit length, mask key), then the payload: the surrogate's second
        // byte, A0, is payload byte 12. Up to it the text could still be valid; with it, not.
        #expect(decode(Array(frame.prefix(8 + 12))).error == nil)
        #expect(decode(Array(frame.prefix(8 + 13))).error?.closeCode == invalidPayload)
    }

    @Test func textEndingInsideACodePointFails() {
        #expect(decode(client(.text, [0x61, 0xE2, 0x82])).error == .invalidPayload("text ends inside a UTF-8 sequence"))
        let fragmented = concat(client(.text, [0x61, 0xF0, 0x9D], fin: false), client(.continuation, [0x84]))
        #expect(decode(fragmented).error?.closeCode == invalidPayload)
        // Cut inside a code point but finished by the next fragment: fine.
        let finished = concat(client(.text, [0x61, 0xF0, 0x9D], fin: false), client(.continuation, [0x84, 0x9E]))
        #expect(decode(finished).messages == [.text("a𝄞")])
    }

    // MARK: - Control frames

    @Test func controlFramesBetweenFragmentsComeFirst() {
        let stream = concat(
            client(.text, "Hel", fin: false), client(.ping, [1, 2]), client(.continuation, "l", fin: false),
            client(.pong, [3]), client(.continuation, "o"))
        #expect(decode(stream).messages == [.ping([1, 2]), .pong([3]), .text("Hello")])
        // Fed frame by frame, the ping is out before the message is finished.
        var decoder = WebSocketDecoder()
        let first = decoder.decode(client(.binary, [1], fin: false))
        let ping = decoder.decode(client(.ping, "now"))
        let last = decoder.decode(client(.continuation, [2]))
        #expect(first.messages.isEmpty)
        #expect(ping.messages == [.ping(Array("now".utf8))])
        #expect(last.messages == [.binary([1, 2])])
    }

    @Test func pingAndPongPayloadsAreReturnedAsIs() {
        let payload: [UInt8] = [0x00, 0xFF, 0xC0, 0x80, 0xED, 0xA0, 0x80]  // not UTF-8, and need not be
        #expect(decode(concat(client(.ping, payload), client(.pong, payload))).messages == [.ping(payload), .pong(payload)])
        let full = (0..<125).map { UInt8($0) }
        #expect(decode(client(.ping, full)).messages == [.ping(full)])
    }

    @Test func closeFramesAreValidated() {
        #expect(decode(client(.close, [])).messages == [.close(code: nil, reason: "")])
        #expect(decode(client(.close, [0x03, 0xE8])).messages == [.close(code: 1000, reason: "")])
        #expect(decode(client(.close, [0x0F, 0xA0] + Array("bye κόσμε".utf8))).messages == [.close(code: 4000, reason: "bye κόσμε")])
        #expect(decode(client(.close, [0x03])).error == .protocolError("close payload of 1 byte"))
        #expect(decode(client(.close, [0x03, 0xED])).error == .protocolError("invalid close code 1005"))
        #expect(decode(client(.close, [0x03, 0xE8, 0xCE, 0xBA, 0xED, 0xA0, 0x80])).error == .invalidPayload("close reason is not UTF-8"))
        #expect(decode(client(.close, [0x03, 0xE8, 0xCE])).error?.closeCode == invalidPayload)
    }

    @Test(arguments: [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535] as [UInt16])
    func closeCodesNotValidOnTheWireFail(_ code: UInt16) {
        #expect(decode(client(.close, [UInt8(code >> 8), UInt8(code & 0xFF)])).error?.closeCode == protocolError)
    }

    @Test(arguments: [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999] as [UInt16])
    func closeCodesValidOnTheWirePass(_ code: UInt16) {
        #expect(decode(client(.close, [UInt8(code >> 8), UInt8(code & 0xFF), 0x6F, 0x6B])).messages == [.close(code: code, reason: "ok")])
    }

    // MARK: - After the end

    @Test func anErrorIsFinal() {
        var decoder = WebSocketDecoder()
        let first = decoder.decode(concat(client(.text, "a"), rawFrame(0x3, []), client(.text, "b")))
        #expect(first.messages == [.text("a")])
        #expect(first.error?.closeCode == protocolError)
        let after = decoder.decode(client(.text, "c"))
        #expect(after.messages.isEmpty)
        #expect(after.error == nil)
    }

    @Test func nothingFollowsTheClose() {
        var decoder = WebSocketDecoder()
        let output = decoder.decode(concat(client(.close, [0x03, 0xE8]), client(.ping, "late"), [0xFF, 0xFF]))
        #expect(output.messages == [.close(code: 1000, reason: "")])
        #expect(output.error == nil)
        let later = decoder.decode(client(.text, "later"))
        #expect(later.messages.isEmpty)
        #expect(later.error == nil)
    }
}
