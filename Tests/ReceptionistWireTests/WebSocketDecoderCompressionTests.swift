import Testing
@testable import ReceptionistWire

/// A compressed client message: deflated by a client-side compressor with `windowBits`, sent in
/// frames of at most `fragment` payload bytes (0: one frame), RSV1 on the first frame only.
private func compressedMessage(
    _ opcode: WebSocketOpcode, _ payload: [UInt8], windowBits: Int = 15, fragment: Int = 0
) -> [UInt8] {
    let deflated = ZlibStream(.deflate(windowBits: windowBits, level: 6)).compress(payload)
    guard fragment > 0, deflated.count > fragment else { return rawFrame(opcode.rawValue, deflated, rsv: 4) }
    var stream: [UInt8] = []
    for start in stride(from: 0, to: deflated.count, by: fragment) {
        let end = min(start + fragment, deflated.count)
        stream += rawFrame(start == 0 ? opcode.rawValue : 0, Array(deflated[start..<end]), fin: end == deflated.count, rsv: start == 0 ? 4 : 0)
    }
    return stream
}

/// Decodes `stream` with permessage-deflate on, fed in pieces of `chop` bytes (0: at once).
private func inflating(_ stream: [UInt8], maxMessageBytes: Int = 256 * 1024, chop: Int = 0) -> Decoded {
    var decoder = WebSocketDecoder(role: .server, maxMessageBytes: maxMessageBytes, inflater: ZlibStream(.inflate))
    var all = Decoded()
    let size = chop > 0 ? chop : max(stream.count, 1)
    for start in stride(from: 0, to: stream.count, by: size) {
        let output = decoder.decode(Array(stream[start..<min(start + size, stream.count)]))
        all.messages += output.messages
        if let error = output.error { all.error = all.error == nil ? error : WebSocketError(closeCode: 0, reason: "second error") }
    }
    return all
}

/// Autobahn TestSuite 12.x: compressed messages of every size and kind, whole and auto-fragmented.
struct CompressedCase: Sendable, CustomTestStringConvertible {
    let kind: String
    let size: Int
    let fragment: Int

    var testDescription: String { "12 \(kind) of \(size), fragments of \(fragment == 0 ? "all" : String(fragment))" }
}

private let sizes = [16, 64, 256, 1024, 4096, 8192, 16_384, 32_768, 65_536, 131_072]
private let compressedCases: [CompressedCase] = ["text", "binary", "noise"].flatMap { kind in
    sizes.flatMap { size in [0, 256].map { CompressedCase(kind: kind, size: size, fragment: $0) } }
}

private let p1002 = WebSocketCloseCode.protocolError
private let p1007 = WebSocketCloseCode.invalidPayload
private let p1009 = WebSocketCloseCode.messageTooBig

/// The decoder with permessage-deflate (RFC 7692; invariant 35): what Autobahn TestSuite
/// sections 12 and 13 check on the receiving side, one behaviour at a time.
@Suite struct WebSocketDecoderCompressionTests {
    @Test(arguments: compressedCases)
    func compressedMessagesOfEverySize(_ test: CompressedCase) {
        let message: WebSocketMessage
        let stream: [UInt8]
        switch test.kind {
        case "text":
            let text = String(decoding: dashboardJSON(test.size), as: UTF8.self)
            message = .text(text)
            stream = compressedMessage(.text, Array(text.utf8), fragment: test.fragment)
        case "binary":
            let data = (0..<test.size).map { UInt8(truncatingIfNeeded: $0 % 251) }
            message = .binary(data)
            stream = compressedMessage(.binary, data, fragment: test.fragment)
        default:
            let data = noise(test.size, seed: UInt32(test.size))
            message = .binary(data)
            stream = compressedMessage(.binary, data, fragment: test.fragment)
        }
        // Ten in a row, as Autobahn sends them, through one decoder and one inflater.
        let ten = (0..<10).flatMap { _ in stream }
        #expect(inflating(ten) == Decoded(messages: Array(repeating: message, count: 10)))
        #expect(inflating(stream, chop: 7) == Decoded(messages: [message]), "every split gives the same")
    }

    @Test(arguments: [9, 10, 12, 15])
    func anyClientWindowInflates(windowBits: Int) {  // 13.3 to 13.6: the client's own window
        let text = String(decoding: dashboardJSON(20_000), as: UTF8.self)
        #expect(inflating(compressedMessage(.text, Array(text.utf8), windowBits: windowBits)) == Decoded(messages: [.text(text)]))
    }

    @Test func compressedAndPlainMessagesInterleave() {
        let big = String(decoding: dashboardJSON(2000), as: UTF8.self)
        let stream = compressedMessage(.text, Array(big.utf8)) + client(.text, "plain") + client(.ping, "p")
            + compressedMessage(.text, Array(big.utf8), fragment: 100) + client(.binary, [1, 2])
        #expect(inflating(stream) == Decoded(messages: [.text(big), .text("plain"), .ping(Array("p".utf8)), .text(big), .binary([1, 2])]))
    }

    @Test func controlFramesBetweenCompressedFragments() {
        let text = String(decoding: dashboardJSON(3000), as: UTF8.self)
        let deflated = ZlibStream(.deflate(windowBits: 15, level: 6)).compress(Array(text.utf8))
        let cut = deflated.count / 2
        let stream = rawFrame(0x1, Array(deflated[..<cut]), fin: false, rsv: 4) + client(.ping, "a")
            + client(.pong, "b") + rawFrame(0x0, Array(deflated[cut...]))
        #expect(inflating(stream) == Decoded(messages: [.ping(Array("a".utf8)), .pong(Array("b".utf8)), .text(text)]))
    }

    @Test func emptyCompressedMessages() {
        // Empty on the wire, or the one-byte empty block a compressor makes (RFC 7692 7.2.3.6).
        #expect(inflating(rawFrame(0x1, [], rsv: 4) + rawFrame(0x1, [0x00], rsv: 4)) == Decoded(messages: [.text(""), .text("")]))
        #expect(inflating(rawFrame(0x2, [], rsv: 4)) == Decoded(messages: [.binary([])]))
    }

    @Test func rsv1IsOnlyForTheFirstFrameOfADataMessage() {
        let deflated = ZlibStream(.deflate(windowBits: 15, level: 6)).compress(Array("Hello, Hello, Hello".utf8))
        let onContinuation = rawFrame(0x1, Array(deflated.prefix(3)), fin: false, rsv: 4) + rawFrame(0x0, Array(deflated.dropFirst(3)), rsv: 4)
        #expect(inflating(onContinuation).error?.closeCode == p1002)
        let plainThenContinuation = rawFrame(0x1, Array("a".utf8), fin: false) + rawFrame(0x0, Array("b".utf8), rsv: 4)
        #expect(inflating(plainThenContinuation).error?.closeCode == p1002)
        #expect(inflating(rawFrame(0x9, [], rsv: 4)).error?.closeCode == p1002)
        #expect(inflating(rawFrame(0xA, [], rsv: 4)).error?.closeCode == p1002)
        #expect(inflating(rawFrame(0x8, [0x03, 0xE8], rsv: 4)).error?.closeCode == p1002)
        // RSV2 and RSV3 stay reserved with permessage-deflate on.
        #expect(inflating(rawFrame(0x1, deflated, rsv: 6)).error?.closeCode == p1002)
        #expect(inflating(rawFrame(0x1, deflated, rsv: 5)).error?.closeCode == p1002)
    }

    @Test func rsv1WithoutTheExtensionIsAProtocolError() {
        let deflated = ZlibStream(.deflate(windowBits: 15, level: 6)).compress(Array("Hello".utf8))
        #expect(decode(rawFrame(0x1, deflated, rsv: 4)).error?.closeCode == p1002)
    }

    @Test func invalidDeflateDataIs1007() {
        #expect(inflating(rawFrame(0x1, [0xFF, 0xFF, 0xFF, 0xFF], rsv: 4)).error?.closeCode == p1007)
        // A good message before the bad one is delivered; nothing after it is.
        let good = compressedMessage(.text, Array("Hello".utf8))
        let decoded = inflating(good + rawFrame(0x2, [0x07, 0x07, 0x07], rsv: 4) + good)
        #expect(decoded.messages == [.text("Hello")])
        #expect(decoded.error?.closeCode == p1007)
    }

    @Test func inflatedTextMustBeUTF8() {
        let bad: [UInt8] = Array("valid, then ".utf8) + [0xC0, 0xAF]
        #expect(inflating(compressedMessage(.text, bad)).error?.closeCode == p1007)
        // The same bytes as binary are fine.
        #expect(inflating(compressedMessage(.binary, bad)) == Decoded(messages: [.binary(bad)]))
    }

    @Test func aZipBombStopsAtTheLimit() {
        // A megabyte of zeros in about a kilobyte: 1009 once it inflates past the limit.
        let bomb = compressedMessage(.binary, [UInt8](repeating: 0, count: 1 << 20))
        #expect(bomb.count < 1200)
        #expect(inflating(bomb, maxMessageBytes: 64 * 1024).error?.closeCode == p1009)
        #expect(inflating(bomb, maxMessageBytes: 1 << 20) == Decoded(messages: [.binary([UInt8](repeating: 0, count: 1 << 20))]))
        #expect(inflating(bomb, maxMessageBytes: (1 << 20) - 1).error?.closeCode == p1009)
    }

    @Test func compressedBytesCountAgainstTheLimitTooAsTheyArrive() {
        // Noise does not shrink: its compressed frames pass the limit before any inflating.
        let stream = compressedMessage(.binary, noise(10_000), fragment: 1000)
        let decoded = inflating(stream, maxMessageBytes: 5000, chop: 500)
        #expect(decoded.messages.isEmpty)
        #expect(decoded.error?.closeCode == p1009)
    }
}
