/// Standard base64 (RFC 4648 section 4, with padding), for the WebSocket handshake keys.
///
/// Decoding is strict because a handshake key is either exactly right or refused: no whitespace,
/// no URL-safe alphabet, padding required, and the unused bits of the last character must be zero
/// so that every byte string has exactly one accepted encoding.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Maps an ASCII byte to its 6-bit value, or 0xFF when it is not in the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, symbol) in alphabet.enumerated() {
            table[Int(symbol)] = UInt8(index)
        }
        return table
    }()

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            out.append(alphabet[Int(group >> 18 & 0x3F)])
            out.append(alphabet[Int(group >> 12 & 0x3F)])
            out.append(second == nil ? UInt8(ascii: "=") : alphabet[Int(group >> 6 & 0x3F)])
            out.append(third == nil ? UInt8(ascii: "=") : alphabet[Int(group & 0x3F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes `text` encodes, or nil unless it is canonical padded base64.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(input.count / 4 * 3)
        var start = 0
        while start < input.count {
            // Padding may only end the last group; any other '=' fails below as a non-alphabet byte.
            var padding = 0
            if start + 4 == input.count, input[start + 3] == UInt8(ascii: "=") {
                padding = input[start + 2] == UInt8(ascii: "=") ? 2 : 1
            }
            var group: UInt32 = 0
            for offset in 0..<(4 - padding) {
                let value = values[Int(input[start + offset])]
                guard value != 0xFF else { return nil }
                group = group << 6 | UInt32(value)
            }
            group <<= UInt32(6 * padding)
            switch padding {
            case 0:
                out.append(UInt8(truncatingIfNeeded: group >> 16))
                out.append(UInt8(truncatingIfNeeded: group >> 8))
                out.append(UInt8(truncatingIfNeeded: group))
            case 1:
                guard group & 0xFF == 0 else { return nil }
                out.append(UInt8(truncatingIfNeeded: group >> 16))
                out.append(UInt8(truncatingIfNeeded: group >> 8))
            default:
                guard group & 0xFFFF == 0 else { return nil }
                out.append(UInt8(truncatingIfNeeded: group >> 16))
            }
            start += 4
        }
        return out
    }
}
