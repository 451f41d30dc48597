import ReceptionistWire

/// Reads a server's frames for a bench subscriber, handing each text frame over where it lies in
/// the read, without a copy, an allocation or a UTF-8 check: every subscriber of a run shares one
/// core, which must stay cheaper than the server it measures. The gateway's own `WebSocketDecoder`
/// builds a checked `String` per message, a cost per byte that charged a server for the size of
/// its frames on the client's core. What the servers send is checked by the end-to-end tests.
///
/// Server frames are unmasked and, from the servers measured, never fragmented: a fragment, a
/// masked frame or a frame over the limit is an error, never a misread. A frame that a read cuts
/// short waits in `partial`, bounded by that limit.
struct FrameReader {
    enum Frame {
        /// A text frame's payload, valid only during the call.
        case text(UnsafeBufferPointer<UInt8>)
        /// A compressed frame counted unread (`Compression.skip`): its size on the wire, header included.
        case compressed(wireBytes: Int)
        case ping([UInt8])
        case close
    }

    /// What a frame with RSV1 set (permessage-deflate) gets.
    enum Compression {
        /// Not negotiated: such a frame is an error.
        case none
        /// Counted as soon as its header is read, its payload passed over as it arrives.
        case skip
        /// Inflated by a stream that keeps no context between messages.
        case inflate(ZlibStream)
    }

    private let compression: Compression
    private let maxFrameBytes: Int
    /// The start of a frame cut short by the end of a read, until the rest arrives.
    private var partial: [UInt8] = []
    /// Payload bytes of a skipped frame still to pass over.
    private var skipping = 0

    init(compression: Compression, maxFrameBytes: Int) {
        self.compression = compression
        self.maxFrameBytes = maxFrameBytes
    }

    /// Hands over, in order, every frame that `bytes` completes. Returns why the stream cannot be
    /// read, after the frames before the fault.
    mutating func read(_ bytes: UnsafeRawBufferPointer, _ each: (Frame) -> Void) -> String? {
        var index = 0
        while index < bytes.count {
            if skipping > 0 {
                let taken = min(skipping, bytes.count - index)
                skipping -= taken
                index += taken
            } else if partial.isEmpty {
                let rest = UnsafeRawBufferPointer(rebasing: bytes[index...])
                guard let header = FrameHeader(rest) else {
                    partial.append(contentsOf: rest)
                    return nil
                }
                switch start(header, held: 0, each) {
                case .fault(let fault): return fault
                case .skipped: continue
                case .read: break
                }
                if rest.count >= header.total {
                    // The usual case: the whole frame in this read.
                    let payload = UnsafeRawBufferPointer(rebasing: rest[header.size..<header.total])
                    if let fault = deliver(header, payload, each) { return fault }
                    index += header.total
                } else {
                    partial.append(contentsOf: rest)
                    return nil
                }
            } else {
                // A frame begun in an earlier read: its header a byte at a time until whole (then
                // started as above), then as much of its payload as this read has.
                var header = partial.withUnsafeBytes { FrameHeader($0) }
                if header == nil {
                    partial.append(bytes[index])
                    index += 1
                    header = partial.withUnsafeBytes { FrameHeader($0) }
                    guard let header else { continue }
                    switch start(header, held: partial.count, each) {
                    case .fault(let fault): return fault
                    case .skipped: partial = []; continue
                    case .read: break
                    }
                }
                let frame = header!
                let taken = min(frame.total - partial.count, bytes.count - index)
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + taken)]))
                index += taken
                guard partial.count == frame.total else { return nil }
                let fault = partial.withUnsafeBytes {
                    deliver(frame, UnsafeRawBufferPointer(rebasing: $0[frame.size...]), each)
                }
                partial = []
                if let fault { return fault }
            }
        }
        return nil
    }

    private enum Start {
        case read, skipped
        case fault(String)
    }

    /// A frame's header is whole, `held` of its bytes taken already: checks it, and passes over a
    /// compressed frame that is only counted.
    private mutating func start(_ header: FrameHeader, held: Int, _ each: (Frame) -> Void) -> Start {
        if header.masked { return .fault("a masked frame from the server") }
        if header.reservedBits { return .fault("reserved bits set") }
        if !header.fin || header.opcode == WebSocketOpcode.continuation.rawValue {
            return .fault("a fragmented message, which the bench client does not read")
        }
        if header.payload > maxFrameBytes { return .fault("a frame over \(maxFrameBytes) bytes") }
        switch (header.compressed, compression) {
        case (true, .none):
            return .fault("a compressed frame, not negotiated")
        case (true, .skip):
            each(.compressed(wireBytes: header.total))
            skipping = header.total - held
            return .skipped
        default:
            return .read
        }
    }

    private func deliver(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, _ each: (Frame) -> Void) -> String? {
        switch WebSocketOpcode(rawValue: header.opcode) {
        case .text:
            guard header.compressed else {
                each(.text(payload.bindMemory(to: UInt8.self)))
                return nil
            }
            guard case .inflate(let inflater) = compression else { return nil }
            switch inflater.inflate(Array(payload), limit: maxFrameBytes) {
            case .success(let text): text.withUnsafeBufferPointer { each(.text($0)) }
            case .failure(let failure): return "a compressed frame that does not inflate (\(failure))"
            }
        case .ping:
            each(.ping(Array(payload)))
        case .close:
            each(.close)
        case .binary, .pong:
            break
        case .continuation, nil:
            return "reserved opcode \(header.opcode)"
        }
        return nil
    }
}

/// A server frame's first bytes, once there are enough of them.
struct FrameHeader {
    let fin: Bool
    let compressed: Bool
    let reservedBits: Bool
    let opcode: UInt8
    let masked: Bool
    /// Header bytes, and payload bytes after them.
    let size: Int
    let payload: Int

    var total: Int { size + payload }

    init?(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 2 else { return nil }
        let first = bytes[0]
        let second = bytes[1]
        fin = first & 0x80 != 0
        compressed = first & 0x40 != 0
        reservedBits = first & 0x30 != 0
        opcode = first & 0x0F
        masked = second & 0x80 != 0
        let mask = masked ? 4 : 0
        switch second & 0x7F {
        case 126:
            guard bytes.count >= 4 else { return nil }
            payload = Int(bytes[2]) << 8 | Int(bytes[3])
            size = 4 + mask
        case 127:
            guard bytes.count >= 10 else { return nil }
            // A length with the top bit set (RFC 6455 section 5.2 forbids it) is clamped, and refused by the limit.
            payload = Int(clamping: bytes[2..<10].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            size = 10 + mask
        case let short:
            payload = Int(short)
            size = 2 + mask
        }
        guard bytes.count >= size else { return nil }
    }
}
