import ReceptionistWire
import Testing

@testable import receptionist_bench

@Suite struct FrameReaderTests {
    /// What a reader handed over, as values that outlive the call.
    private enum Seen: Equatable {
        case text(String)
        case compressed(Int)
        case ping([UInt8])
        case close
    }

    /// Feeds `stream` in reads that end at `cuts`, and returns what was handed over and the fault.
    private func read(
        _ stream: [UInt8], cuts: [Int] = [], compression: FrameReader.Compression = .none, limit: Int = 1 << 20
    ) -> (seen: [Seen], fault: String?) {
        var reader = FrameReader(compression: compression, maxFrameBytes: limit)
        var seen: [Seen] = []
        var start = 0
        for end in cuts + [stream.count] {
            let fault = stream.withUnsafeBytes { bytes in
                reader.read(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) { frame in
                    switch frame {
                    case .text(let text): seen.append(.text(String(decoding: text, as: UTF8.self)))
                    case .compressed(let wireBytes): seen.append(.compressed(wireBytes))
                    case .ping(let payload): seen.append(.ping(payload))
                    case .close: seen.append(.close)
                    }
                }
            }
            if let fault { return (seen, fault) }
            start = end
        }
        return (seen, nil)
    }

    private static let long = String(repeating: "é0123456789", count: 7_000)
    /// Every length form (7, 16 and 64 bits), a ping, a binary frame that is passed over, a close.
    private static let stream: [UInt8] = WebSocketEncoder.text(#"{"seq":1}"#)
        + WebSocketEncoder.text(String(repeating: "x", count: 300))
        + WebSocketEncoder.frame(.ping, payload: [1, 2, 3])
        + WebSocketEncoder.frame(.binary, payload: [9, 9])
        + WebSocketEncoder.text(long)
        + WebSocketEncoder.text("")
        + WebSocketEncoder.close(code: 1001, reason: "bye")
    private static let expected: [Seen] = [
        .text(#"{"seq":1}"#), .text(String(repeating: "x", count: 300)), .ping([1, 2, 3]), .text(long), .text(""), .close,
    ]

    @Test func framesReadWholeAreHandedOverInOrder() {
        let (seen, fault) = read(Self.stream)
        #expect(fault == nil)
        #expect(seen == Self.expected)
    }

    @Test func framesCutAnywhereByTheEndsOfReadsReadTheSame() {
        // Every single cut within the first frames, and cuts inside the long frame's header and payload.
        let longStart = Self.stream.count - WebSocketEncoder.text(Self.long).count
            - WebSocketEncoder.text("").count - WebSocketEncoder.close(code: 1001, reason: "bye").count
        for cut in Array(1..<longStart + 12) + [longStart + 5_000, Self.stream.count - 3] {
            let (seen, fault) = read(Self.stream, cuts: [cut])
            #expect(fault == nil, "cut at \(cut)")
            #expect(seen == Self.expected, "cut at \(cut)")
        }
        let everyByte = Array(1..<Self.stream.count)
        #expect(read(Self.stream, cuts: everyByte).seen == Self.expected)
    }

    private static let body = Array(String(repeating: #"{"color":"red","id":"tile-7"}"#, count: 40).utf8)

    private static func compressedFrame() -> [UInt8] {
        let payload = ZlibStream(.deflate(windowBits: 15, level: 6)).compress(body)
        return WebSocketEncoder.header(.text, length: payload.count, compressed: true) + payload
    }

    @Test func skippedCompressedFramesAreCountedWithTheirWireBytesAndThePlainOnesStillRead() {
        let frame = Self.compressedFrame()
        let stream = frame + WebSocketEncoder.text("plain") + frame
        let expected: [Seen] = [.compressed(frame.count), .text("plain"), .compressed(frame.count)]
        for cut in 0..<stream.count {
            let (seen, fault) = read(stream, cuts: cut == 0 ? [] : [cut], compression: .skip)
            #expect(fault == nil, "cut at \(cut)")
            #expect(seen == expected, "cut at \(cut)")
        }
    }

    @Test func compressedFramesAreInflatedWhenAsked() {
        let frame = Self.compressedFrame()
        let inflater = ZlibStream(.inflate)
        let text = String(decoding: Self.body, as: UTF8.self)
        for cut in [0, 1, 3, frame.count / 2, frame.count + 1] {
            let (seen, fault) = read(frame + frame, cuts: cut == 0 ? [] : [cut], compression: .inflate(inflater))
            #expect(fault == nil, "cut at \(cut)")
            #expect(seen == [.text(text), .text(text)], "cut at \(cut)")
        }
        // Inflated past the limit: refused, not handed over.
        let (seen, fault) = read(frame, compression: .inflate(inflater), limit: Self.body.count - 1)
        #expect(seen.isEmpty)
        #expect(fault != nil)
    }

    @Test func whatTheBenchDoesNotReadIsAFaultAfterTheFramesBeforeIt() {
        let first = WebSocketEncoder.text("ok")
        let cases: [(String, [UInt8], FrameReader.Compression)] = [
            ("masked", WebSocketEncoder.frame(.text, payload: Array("x".utf8), maskKey: 7), .none),
            ("fragment", WebSocketEncoder.frame(.text, payload: Array("x".utf8), fin: false), .none),
            ("continuation", WebSocketEncoder.frame(.continuation, payload: Array("x".utf8)), .none),
            ("not negotiated", Self.compressedFrame(), .none),
            ("reserved bits", [0x81 | 0x20, 0x00], .none),
            ("reserved opcode", [0x83, 0x00], .none),
        ]
        for (name, frame, compression) in cases {
            for cut in [0, first.count + 1] {
                let (seen, fault) = read(first + frame, cuts: cut == 0 ? [] : [cut], compression: compression)
                #expect(seen == [.text("ok")], "\(name)")
                #expect(fault != nil, "\(name)")
            }
        }
    }

    @Test func aFrameOverTheLimitIsRefusedFromItsHeaderBeforeItsPayloadIsKept() {
        let header = WebSocketEncoder.header(.text, length: 5_000)
        // Only the header has arrived: the limit refuses it before any payload is buffered.
        let (seen, fault) = read(header, limit: 4_999)
        #expect(seen.isEmpty)
        #expect(fault == "a frame over 4999 bytes")
        // A 64-bit length with its top bit set is refused too, not read as negative.
        let huge: [UInt8] = [0x81, 127, 0x80, 0, 0, 0, 0, 0, 0, 1]
        #expect(read(huge, cuts: [3]).fault != nil)
        // At the limit it is read.
        #expect(read(header + Array(repeating: UInt8(ascii: "a"), count: 5_000), limit: 5_000).seen.count == 1)
    }
}
