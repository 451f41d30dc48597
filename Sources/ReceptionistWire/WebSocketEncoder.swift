/// Builds WebSocket frames (RFC 6455 section 5.2), header and payload in one buffer so that a
/// frame is one write.
///
/// Servers send unmasked frames; a client passes a mask key (which should be fresh and random
/// per frame; choosing it is the caller's job since this module has no randomness).
public enum WebSocketEncoder {
    /// The most a close reason may take: a control payload is at most 125 bytes, 2 of them the code.
    public static let maxCloseReasonBytes = 123

    /// The header of an unmasked, final frame of `length` payload bytes (2 to 10 bytes), for a
    /// sender that lays the payload after it itself (`frame` writes the whole frame).
    /// `compressed` sets RSV1: the payload is a permessage-deflate message (RFC 7692 section 6).
    public static func header(_ opcode: WebSocketOpcode, length: Int, compressed: Bool = false) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: headerCount(length: length)) { buffer, count in
            count = writeHeader(opcode, length: length, compressed: compressed, at: UnsafeMutableRawPointer(buffer.baseAddress!))
        }
    }

    /// How many bytes `header` takes for a payload of `length` bytes.
    public static func headerCount(length: Int) -> Int {
        length <= 125 ? 2 : length <= 0xFFFF ? 4 : 10
    }

    /// Writes `header`'s bytes at `start`, which has room for `headerCount(length:)` of them, and
    /// returns how many it wrote: a frame laid out in a buffer made for it, with no array for its
    /// header (every message sent to a WebSocket has one).
    public static func writeHeader(
        _ opcode: WebSocketOpcode, length: Int, compressed: Bool = false, at start: UnsafeMutableRawPointer
    ) -> Int {
        let bytes = start.assumingMemoryBound(to: UInt8.self)
        bytes[0] = 0x80 | (compressed ? 0x40 : 0) | opcode.rawValue
        if length <= 125 {
            bytes[1] = UInt8(length)
            return 2
        }
        if length <= 0xFFFF {
            bytes[1] = 126
            bytes[2] = UInt8(truncatingIfNeeded: length >> 8)
            bytes[3] = UInt8(truncatingIfNeeded: length)
            return 4
        }
        bytes[1] = 127
        for index in 0..<8 {
            bytes[2 + index] = UInt8(truncatingIfNeeded: UInt64(length) >> UInt64(56 - 8 * index))
        }
        return 10
    }

    /// One frame. With a `maskKey` the payload is masked and the key sent.
    ///
    /// Control frames must be final and carry at most 125 bytes; that is the caller's promise.
    public static func frame(
        _ opcode: WebSocketOpcode, payload: some Collection<UInt8>, fin: Bool = true, maskKey: UInt32? = nil
    ) -> [UInt8] {
        let length = payload.count
        assert(!opcode.isControl || (fin && length <= 125), "control frames are final and at most 125 bytes")
        var out: [UInt8] = []
        out.reserveCapacity(14 + length)
        out.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        // The shortest length form: 7 bits, then 16, then 64.
        if length <= 125 {
            out.append(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            out.append(maskBit | 126)
            out.append(UInt8(truncatingIfNeeded: length >> 8))
            out.append(UInt8(truncatingIfNeeded: length))
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: UInt64(length) >> UInt64(shift)))
            }
        }
        if let maskKey {
            for position in 0..<4 {
                out.append(WebSocketMask.keyByte(maskKey, at: position))
            }
        }
        let start = out.count
        // In one copy where the payload's bytes lie together (an array, always, here): this
        // generic function runs unspecialised across the module boundary, where appending the
        // collection itself walked it byte by byte.
        let copied: Void? = payload.withContiguousStorageIfAvailable { out.append(contentsOf: $0) }
        if copied == nil { out.append(contentsOf: payload) }
        if let maskKey {
            out.withUnsafeMutableBytes { bytes in
                WebSocketMask.apply(key: maskKey, offset: 0, to: UnsafeMutableRawBufferPointer(rebasing: bytes[start...]))
            }
        }
        return out
    }

    /// A final text frame for a UTF-8 string.
    public static func text(_ text: String, maskKey: UInt32? = nil) -> [UInt8] {
        frame(.text, payload: text.utf8, maskKey: maskKey)
    }

    /// A close frame with `code` and `reason`, the reason cut to 123 bytes at a code point boundary
    /// so that the payload stays valid UTF-8.
    public static func close(code: UInt16, reason: String, maskKey: UInt32? = nil) -> [UInt8] {
        var payload: [UInt8] = [UInt8(code >> 8), UInt8(code & 0xFF)]
        let utf8 = Array(reason.utf8)
        var end = min(utf8.count, maxCloseReasonBytes)
        // Back off over continuation bytes (10xxxxxx) so the cut falls before a lead byte.
        while end < utf8.count && end > 0 && utf8[end] & 0xC0 == 0x80 {
            end -= 1
        }
        payload.append(contentsOf: utf8[..<end])
        return frame(.close, payload: payload, maskKey: maskKey)
    }
}
