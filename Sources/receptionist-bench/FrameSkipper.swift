/// Reads a server's frames without inflating the compressed ones: most subscribers of a
/// compression run only count what reaches them (`--inflate-every`), so that the clients, which
/// share one core, stay cheaper than the server they measure. A compressed frame is reported as
/// soon as its header is read, and its payload is skipped as it arrives; a plain frame is handed
/// over whole. Server frames are unmasked and, from the servers measured, never fragmented.
struct FrameSkipper {
    enum Frame {
        /// A frame with RSV1 set: its size on the wire, header included.
        case compressed(wireBytes: Int)
        case plain(opcode: UInt8, payload: [UInt8])
    }

    private var header: [UInt8] = []
    /// Payload bytes of a compressed frame still to pass over.
    private var skipping = 0
    /// A plain frame's opcode and length while its payload is gathered.
    private var collecting: (opcode: UInt8, length: Int)?
    private var payload: [UInt8] = []

    mutating func read(_ bytes: UnsafeRawBufferPointer, _ each: (Frame) -> Void) {
        var index = 0
        while index < bytes.count {
            if skipping > 0 {
                let taken = min(skipping, bytes.count - index)
                skipping -= taken
                index += taken
            } else if let (opcode, length) = collecting {
                let taken = min(length - payload.count, bytes.count - index)
                payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + taken)]))
                index += taken
                if payload.count == length {
                    each(.plain(opcode: opcode, payload: payload))
                    payload = []
                    collecting = nil
                }
            } else {
                header.append(bytes[index])
                index += 1
                guard let (length, headerBytes) = Self.lengths(header) else { continue }
                let first = header[0]
                header.removeAll(keepingCapacity: true)
                if first & 0x40 != 0 {
                    each(.compressed(wireBytes: headerBytes + length))
                    skipping = length
                } else if length == 0 {
                    each(.plain(opcode: first & 0x0F, payload: []))
                } else {
                    collecting = (first & 0x0F, length)
                    payload.reserveCapacity(length)
                }
            }
        }
    }

    /// The payload length and the header's size, once the header is complete.
    private static func lengths(_ header: [UInt8]) -> (payload: Int, header: Int)? {
        guard header.count >= 2 else { return nil }
        switch header[1] & 0x7F {
        case 126:
            guard header.count >= 4 else { return nil }
            return (Int(header[2]) << 8 | Int(header[3]), 4)
        case 127:
            guard header.count >= 10 else { return nil }
            return (header[2..<10].reduce(0) { $0 << 8 | Int($1) }, 10)
        case let short:
            return (Int(short), 2)
        }
    }
}
