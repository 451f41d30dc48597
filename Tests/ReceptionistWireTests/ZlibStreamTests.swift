import Testing
@testable import ReceptionistWire

/// Bytes that deflate cannot shrink: a linear congruential sequence.
func noise(_ count: Int, seed: UInt32 = 1) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 1_664_525 &+ 1_013_904_223
        return UInt8(truncatingIfNeeded: state >> 24)
    }
}

/// JSON-like text, as the gateway compresses: repetitive keys, changing values.
func dashboardJSON(_ count: Int) -> [UInt8] {
    var text = ""
    var index = 0
    while text.utf8.count < count {
        text += "{\"host\":\"web-\(index % 7)\",\"cpu\":\(index * 37 % 100),\"mem\":\(index * 13 % 1000)},"
        index += 1
    }
    return Array(text.utf8.prefix(count))
}

/// The raw-deflate codec permessage-deflate rests on (invariant 35).
@Suite struct ZlibStreamTests {
    // RFC 7692 section 7.2.3.1: "Hello" in one compressed block, the sync flush's tail removed.
    static let helloCompressed: [UInt8] = [0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]

    @Test func inflatesTheRFCExamples() {
        let inflater = ZlibStream(.inflate)
        let hello = Array("Hello".utf8)
        #expect(inflater.inflate(Self.helloCompressed, limit: 100) == .success(hello))
        // The same message again: the stream is reset between them (no context takeover, not 7.2.3.2).
        #expect(inflater.inflate(Self.helloCompressed, limit: 100) == .success(hello))
        // 7.2.3.3: a stored (uncompressed) block.
        #expect(inflater.inflate([0x00, 0x05, 0x00, 0xFA, 0xFF, 0x48, 0x65, 0x6C, 0x6C, 0x6F, 0x00], limit: 100) == .success(hello))
        // 7.2.3.5: two blocks in one message.
        let twoBlocks: [UInt8] = [0xF2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xCA, 0xC9, 0xC9, 0x07, 0x00]
        #expect(inflater.inflate(twoBlocks, limit: 100) == .success(hello))
        // 7.2.3.4: a final block (BFINAL set), after which only the appended tail follows.
        #expect(inflater.inflate([0xF3, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00, 0x00], limit: 100) == .success(hello))
    }

    /// A message cut short inside a deflate block, or with bytes after its final block: the
    /// appended tail was read as the block's data (`hello worl` and a stray byte reached the
    /// application), or the bytes after were dropped. Refused now (1007 on the wire).
    @Test func aMessageCutShortOrWithBytesAfterItsFinalBlockIsRefused() {
        let compressor = ZlibStream(.deflate(windowBits: 15, level: 6))
        let whole = compressor.compress(Array(String(repeating: "hello world ", count: 20).utf8))
        let inflater = ZlibStream(.inflate)
        #expect(inflater.inflate(whole, limit: 1000) == .success(Array(String(repeating: "hello world ", count: 20).utf8)))
        for cut in [1, whole.count / 2, whole.count - 2] {
            guard case .failure(.invalid) = inflater.inflate(Array(whole[..<cut]), limit: 1000) else {
                Issue.record("a message cut to \(cut) of \(whole.count) bytes was taken")
                continue
            }
        }
        // A final block (RFC 7692 7.2.3.4) with bytes after it.
        let final: [UInt8] = [0xF3, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00, 0x00]
        guard case .failure(.invalid) = inflater.inflate(final + Array("GARBAGE".utf8), limit: 100) else {
            Issue.record("bytes after a final block were dropped in silence")
            return
        }
        guard case .failure(.invalid) = inflater.inflate(Array(final.prefix(5)), limit: 100) else {
            Issue.record("a final block cut short was taken")
            return
        }
        #expect(inflater.inflate(Array(final.prefix(7)), limit: 100) == .success(Array("Hello".utf8)))
    }

    @Test func compressesHelloAsTheRFCDoes() {
        let compressor = ZlibStream(.deflate(windowBits: 15, level: 6))
        #expect(compressor.compress(Array("Hello".utf8)) == Self.helloCompressed)
        // Reset after each message: the second is compressed exactly as the first.
        #expect(compressor.compress(Array("Hello".utf8)) == Self.helloCompressed)
    }

    @Test func anEmptyMessageIsOneByteOnTheWire() {
        // A sync flush of nothing is one empty stored block: 0x00 before the tail (RFC 7692 7.2.3.6).
        #expect(ZlibStream(.deflate(windowBits: 15, level: 6)).compress([UInt8]()) == [0x00])
        #expect(ZlibStream(.inflate).inflate([0x00], limit: 10) == .success([]))
        #expect(ZlibStream(.inflate).inflate([], limit: 10) == .success([]))
    }

    @Test(arguments: [9, 10, 12, 15])
    func roundTripsEveryShapeAtEveryWindow(windowBits: Int) {
        let compressor = ZlibStream(.deflate(windowBits: windowBits, level: 6))
        let inflater = ZlibStream(.inflate)
        for size in [1, 16, 64, 256, 1024, 4096, 65_536, 131_072] {
            for input in [dashboardJSON(size), noise(size, seed: UInt32(size)), [UInt8](repeating: 0x2A, count: size)] {
                let compressed = compressor.compress(input)
                #expect(!compressed.suffix(4).elementsEqual(ZlibStream.flushTail), "the tail is left off")
                #expect(inflater.inflate(compressed, limit: size) == .success(input), "size \(size), window \(windowBits)")
            }
        }
    }

    @Test func repetitiveJSONShrinksAndNoiseStaysWithinTheBound() {
        let compressor = ZlibStream(.deflate(windowBits: 15, level: 6))
        #expect(compressor.compress(dashboardJSON(1024)).count < 512)
        // Noise comes out as stored blocks: a few bytes of framing per 16 KiB more than the input.
        let random = noise(100_000)
        #expect(compressor.compress(random).count <= random.count + 5 * (random.count / 16_384 + 2))
    }

    @Test func inflatingStopsAtTheLimitAndNotAfter() {
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        let bomb = ZlibStream(.deflate(windowBits: 15, level: 9)).compress(zeros)
        #expect(bomb.count < 1100, "a megabyte of zeros is about a kilobyte compressed")
        let inflater = ZlibStream(.inflate)
        #expect(inflater.inflate(bomb, limit: 64 * 1024) == .failure(.tooBig))
        // Exactly at the limit is allowed; one byte under it is not.
        #expect(inflater.inflate(bomb, limit: 1 << 20) == .success(zeros))
        #expect(inflater.inflate(bomb, limit: (1 << 20) - 1) == .failure(.tooBig))
        // The stream is reset after a failure: the next message inflates.
        #expect(inflater.inflate(Self.helloCompressed, limit: 5) == .success(Array("Hello".utf8)))
        #expect(inflater.inflate(Self.helloCompressed, limit: 4) == .failure(.tooBig))
    }

    @Test func dataThatIsNotDeflateIsInvalidAndTheStreamRecovers() {
        let inflater = ZlibStream(.inflate)
        // Block type 3 is reserved (RFC 1951 section 3.2.3).
        guard case .failure(.invalid) = inflater.inflate([0xFF, 0xFF, 0xFF, 0xFF], limit: 1000) else {
            Issue.record("reserved block type accepted")
            return
        }
        // A stored block whose length and its complement disagree.
        guard case .failure(.invalid) = inflater.inflate([0x00, 0x05, 0x00, 0x00, 0x00, 0x48], limit: 1000) else {
            Issue.record("bad stored length accepted")
            return
        }
        #expect(inflater.inflate(Self.helloCompressed, limit: 100) == .success(Array("Hello".utf8)))
    }
}
