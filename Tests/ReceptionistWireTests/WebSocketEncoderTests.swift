import Testing
@testable import ReceptionistWire

@Suite struct WebSocketEncoderTests {
    // RFC 6455 section 5.7.
    @Test func rfcHelloFrames() {
        #expect(WebSocketEncoder.text("Hello") == [0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
        #expect(
            WebSocketEncoder.text("Hello", maskKey: rfcMaskKey)
                == [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
        #expect(WebSocketEncoder.frame(.text, payload: Array("Hel".utf8), fin: false) == [0x01, 0x03, 0x48, 0x65, 0x6C])
        #expect(WebSocketEncoder.frame(.continuation, payload: Array("lo".utf8)) == [0x80, 0x02, 0x6C, 0x6F])
        #expect(WebSocketEncoder.frame(.ping, payload: Array("Hello".utf8)) == [0x89, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
        #expect(
            WebSocketEncoder.frame(.pong, payload: Array("Hello".utf8), maskKey: rfcMaskKey)
                == [0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
    }

    @Test func rfcBinaryLengthForms() {
        let frame256 = WebSocketEncoder.frame(.binary, payload: [UInt8](repeating: 7, count: 256))
        #expect(Array(frame256.prefix(4)) == [0x82, 0x7E, 0x01, 0x00])
        #expect(frame256.count == 4 + 256)
        let frame64k = WebSocketEncoder.frame(.binary, payload: [UInt8](repeating: 7, count: 65536))
        #expect(Array(frame64k.prefix(10)) == [0x82, 0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00])
        #expect(frame64k.count == 10 + 65536)
    }

    /// The shortest length form, with or without the 4 key bytes.
    @Test(arguments: [(0, 2), (1, 2), (125, 2), (126, 4), (127, 4), (65535, 4), (65536, 10)])
    func headerSizes(_ length: Int, _ headerSize: Int) {
        let payload = [UInt8](repeating: 0x5A, count: length)
        #expect(WebSocketEncoder.frame(.binary, payload: payload).count == headerSize + length)
        let masked = WebSocketEncoder.frame(.binary, payload: payload, maskKey: 0xDEAD_BEEF)
        #expect(masked.count == headerSize + 4 + length)
        #expect(masked[1] & 0x80 == 0x80)
        #expect(Array(masked[headerSize..<(headerSize + 4)]) == [0xDE, 0xAD, 0xBE, 0xEF])
    }

    /// Masking eight bytes at a time must match the byte-wise definition for every length and key.
    @Test func maskingMatchesTheDefinition() {
        let key: UInt32 = 0x0102_80FF
        let keyBytes: [UInt8] = [0x01, 0x02, 0x80, 0xFF]
        for length in 0..<40 {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 91) }
            let frame = WebSocketEncoder.frame(.binary, payload: payload, maskKey: key)
            let expected = payload.enumerated().map { $0.element ^ keyBytes[$0.offset % 4] }
            #expect(Array(frame.suffix(length)) == expected, "length \(length)")
            #expect(frame == rawFrame(0x2, payload, mask: key))
        }
    }

    @Test func closeCarriesCodeAndReason() {
        #expect(WebSocketEncoder.close(code: 1000, reason: "") == [0x88, 0x02, 0x03, 0xE8])
        #expect(WebSocketEncoder.close(code: 1001, reason: "bye") == [0x88, 0x05, 0x03, 0xE9, 0x62, 0x79, 0x65])
        let masked = WebSocketEncoder.close(code: 4000, reason: "x", maskKey: rfcMaskKey)
        #expect(decode(masked).messages == [.close(code: 4000, reason: "x")])
    }

    /// A long reason is cut to 123 bytes, backing off to a code point boundary.
    @Test(arguments: [
        (String(repeating: "a", count: 200), 123),
        (String(repeating: "a", count: 122) + "é", 122),  // é would end at byte 124
        (String(repeating: "€", count: 50), 123),  // 41 whole euros
        ("a" + String(repeating: "€", count: 50), 121),
        (String(repeating: "𝄞", count: 40), 120),
        (String(repeating: "b", count: 123), 123),
    ])
    func closeReasonIsTruncatedOnABoundary(_ reason: String, _ reasonBytes: Int) {
        let frame = WebSocketEncoder.close(code: 1000, reason: reason)
        #expect(Int(frame[1]) == 2 + reasonBytes)
        #expect(frame.count <= 2 + 125)
        let decoded = decode(frame, role: .client)
        #expect(decoded.error == nil)
        guard case .close(let code, let text)? = decoded.messages.first else {
            Issue.record("no close message")
            return
        }
        #expect(code == 1000)
        #expect(text.utf8.count == reasonBytes)
        #expect(reason.hasPrefix(text))
    }
}
