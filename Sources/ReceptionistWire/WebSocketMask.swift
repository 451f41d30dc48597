/// The XOR masking of RFC 6455 section 5.3, shared by the decoder (unmasking) and the encoder.
///
/// The key is the 32-bit value of the four key bytes in wire order (big-endian), so byte `i` of
/// a payload is XORed with byte `i % 4` of that order. Masking and unmasking are the same thing.
enum WebSocketMask {
    /// Masks `buffer` in place; `offset` is where the buffer starts within the frame's payload,
    /// so a payload that arrives in pieces is unmasked piece by piece.
    static func apply(key: UInt32, offset: Int, to buffer: UnsafeMutableRawBufferPointer) {
        let count = buffer.count
        guard count > 0, key != 0 else { return }
        // The key bytes as they line up with the buffer's first byte, repeated to eight bytes, so
        // the bulk of the work is one 64-bit XOR per eight bytes whatever the host byte order.
        var pattern: UInt64 = 0
        withUnsafeMutableBytes(of: &pattern) { bytes in
            for i in 0..<8 {
                bytes[i] = keyByte(key, at: offset + i)
            }
        }
        var index = 0
        while index + 8 <= count {
            let word = buffer.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            buffer.storeBytes(of: word ^ pattern, toByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < count {
            buffer[index] ^= keyByte(key, at: offset + index)
            index += 1
        }
    }

    @inline(__always)
    static func keyByte(_ key: UInt32, at position: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: key >> (24 - 8 * UInt32(position & 3)))
    }
}
