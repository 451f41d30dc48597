import CZlib

/// One raw-deflate stream (RFC 1951, no zlib header), as permessage-deflate carries messages
/// (RFC 7692 section 7.2): a compressor or a decompressor. It is reset after every message, so
/// no message depends on another ("no context takeover" both ways) and one stream serves every
/// connection of its thread: a connection that negotiated compression holds no zlib state.
///
/// The only file of the wire module that imports zlib. Not thread-safe: one thread only (the
/// loop's, for the gateway).
public final class ZlibStream {
    public enum Mode: Sendable, Equatable {
        /// Compresses with a sliding window of `2^windowBits` bytes (9...15).
        case deflate(windowBits: Int, level: Int)
        /// Decompresses data made with any window up to 2^15 bytes.
        case inflate
    }

    /// Why a message could not be inflated.
    public enum InflateFailure: Error, Sendable, Equatable {
        /// The output would pass the limit; inflation stopped there.
        case tooBig
        /// The input is not valid deflate data.
        case invalid(String)
    }

    public let mode: Mode
    /// zlib keeps a pointer back to its `z_stream`, so the struct must never move: it lives in
    /// memory of its own for the stream's life.
    private let stream: UnsafeMutablePointer<z_stream>

    /// The four bytes a sync flush ends with, which permessage-deflate leaves off the wire
    /// (RFC 7692 section 7.2.1) and the receiver puts back (section 7.2.2).
    public static let flushTail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    public init(_ mode: Mode) {
        self.mode = mode
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status: Int32
        switch mode {
        case .deflate(let windowBits, let level):
            precondition((9...15).contains(windowBits), "raw deflate takes window bits 9...15")
            // A negative window selects raw deflate: no zlib header or checksum.
            status = receptionist_deflate_init(stream, Int32(level), -Int32(windowBits))
        case .inflate:
            status = receptionist_inflate_init(stream, -15)
        }
        // Only a lack of memory fails here, as for any allocation.
        precondition(status == Z_OK, "zlib could not start a stream (\(status))")
    }

    deinit {
        switch mode {
        case .deflate: deflateEnd(stream)
        case .inflate: inflateEnd(stream)
        }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    // MARK: Compressing

    /// Compresses one message and returns it as permessage-deflate sends it: ended by a sync
    /// flush whose four-byte tail is left off. The stream is reset afterwards.
    public func compress(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        guard case .deflate = mode else { preconditionFailure("compress on an inflating stream") }
        // The bound covers the worst case (stored blocks) plus the sync flush's empty block.
        let capacity = Int(deflateBound(stream, UInt(input.count))) + 16
        var output: [UInt8] = []
        var consumedAll = false
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = UInt32(input.count)
        while !consumedAll {
            let start = output.count
            output.append(contentsOf: repeatElement(0, count: capacity))
            output.withUnsafeMutableBytes { bytes in
                stream.pointee.next_out = bytes.baseAddress!.advanced(by: start).assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = UInt32(capacity)
                _ = deflate(stream, Z_SYNC_FLUSH)
            }
            output.removeLast(Int(stream.pointee.avail_out))
            // Done when all input is taken and the flush fitted (space was left over).
            consumedAll = stream.pointee.avail_in == 0 && stream.pointee.avail_out != 0
        }
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
        deflateReset(stream)
        if output.count >= 4 && output.suffix(4).elementsEqual(Self.flushTail) {
            output.removeLast(4)
        }
        return output
    }

    public func compress(_ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { compress($0) }
    }

    // MARK: Inflating

    /// All the input taken: a whole message, if inflate stopped between blocks, as a message
    /// ends with the tail's empty stored block (zlib's `data_type` has 128 then). Stopped inside
    /// a block, the message was cut short, and the tail was read as its data.
    private func ended(_ output: UnsafeMutableRawBufferPointer, _ produced: Int) -> Result<[UInt8], InflateFailure> {
        guard stream.pointee.data_type & 128 != 0 else { return .failure(.invalid("the message ends inside a deflate block")) }
        return .success(Array(output[..<produced]))
    }

    /// Inflates one message received without its sync-flush tail. Stops as soon as the output
    /// would pass `limit` bytes, so a small message that inflates to gigabytes costs no more
    /// than the limit. The stream is reset afterwards, whatever happened.
    public func inflate(_ compressed: consuming [UInt8], limit: Int) -> Result<[UInt8], InflateFailure> {
        guard case .inflate = mode else { preconditionFailure("inflate on a deflating stream") }
        defer {
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
            inflateReset(stream)
        }
        // No bytes at all: an empty message, as some peers send one (RFC 7692 has it as 0x00).
        guard !compressed.isEmpty else { return .success([]) }
        var input = compressed
        input.append(contentsOf: Self.flushTail)
        // Start near a typical ratio and double: the output is never more than twice what it holds.
        var capacity = min(limit + 1, max(256, input.count * 4))
        var output = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer { output.deallocate() }
        var produced = 0
        return input.withUnsafeBytes { bytes -> Result<[UInt8], InflateFailure> in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.pointee.avail_in = UInt32(bytes.count)
            while true {
                if produced == capacity {
                    // Full: one byte past the limit already proves the message too big.
                    if capacity > limit { return .failure(.tooBig) }
                    let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: min(capacity * 2, limit + 1), alignment: 1)
                    larger.copyMemory(from: UnsafeRawBufferPointer(rebasing: output[..<produced]))
                    output.deallocate()
                    output = larger
                    capacity = larger.count
                }
                stream.pointee.next_out = output.baseAddress!.advanced(by: produced).assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = UInt32(capacity - produced)
                // Block by block: where the input ends, inflate is then between blocks (a whole
                // message) or inside one (a message cut short), and says which (`ended`).
                let status = CZlib.inflate(stream, Z_BLOCK)
                produced = capacity - Int(stream.pointee.avail_out)
                if produced > limit { return .failure(.tooBig) }
                switch status {
                case Z_OK:
                    // More may come only if the input is not all taken or the output filled up.
                    if stream.pointee.avail_in == 0 && produced < capacity { return ended(output, produced) }
                case Z_STREAM_END:
                    // A final block: what follows it can only be the tail we appended, untouched,
                    // after at most the one 0x00 that RFC 7692 (section 7.2.3.4) puts after a
                    // final block. Less left, and the tail was read as the block's data (it was
                    // cut short); more, and bytes after the final block were about to be dropped.
                    let left = Int(stream.pointee.avail_in), tail = Self.flushTail.count
                    guard left == tail || (left == tail + 1 && stream.pointee.next_in.pointee == 0) else {
                        return .failure(.invalid(left < tail ? "the message ends inside a deflate block" : "data after the final deflate block"))
                    }
                    return .success(Array(output[..<produced]))
                case Z_BUF_ERROR:
                    // No progress possible: all input is taken (the message is complete), or the
                    // output is full and the loop grows it.
                    if produced < capacity { return ended(output, produced) }
                default:
                    let message = stream.pointee.msg.map { String(cString: $0) } ?? "status \(status)"
                    return .failure(.invalid(message))
                }
            }
        }
    }
}
