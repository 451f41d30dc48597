import Glibc

/// Byte scans over a server frame's text instead of a JSON parse: a client must stay cheaper than
/// the server it measures.
enum FrameScan {
    static func hasPrefix(_ text: UnsafeBufferPointer<UInt8>, _ prefix: [UInt8]) -> Bool {
        guard text.count >= prefix.count else { return false }
        for i in prefix.indices where text[i] != prefix[i] { return false }
        return true
    }

    /// The text up to its first `[`: a `changes` frame's members before the list of changes, where
    /// its version and commit times are.
    static func head(_ text: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        let end = text.firstIndex(of: UInt8(ascii: "[")) ?? text.count
        return UnsafeBufferPointer(rebasing: text[..<end])
    }

    /// The whole number that follows the first `key` (such as `"sentAt":`), if any.
    static func number(after key: [UInt8], in text: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard var position = end(of: key, in: text) else { return nil }
        var value: Int64 = 0
        var digits = 0
        while position < text.count, text[position] >= 48, text[position] <= 57 {
            value = value * 10 + Int64(text[position] - 48)
            position += 1
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// The boolean that follows the first `key` (such as `"reset":`), if any.
    static func flag(after key: [UInt8], in text: UnsafeBufferPointer<UInt8>) -> Bool? {
        guard let position = end(of: key, in: text), position < text.count else { return nil }
        switch text[position] {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: return nil
        }
    }

    /// Where the text after the first `key` starts, if `key` occurs: `memchr` to each candidate
    /// first byte, and `memcmp` only where the second byte matches too (every key begins with a
    /// quote, of which JSON is full). A client scanning every frame byte by byte in Swift spent
    /// more on it than on reading its sockets.
    private static func end(of key: [UInt8], in text: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let base = text.baseAddress, key.count >= 2, text.count >= key.count else { return nil }
        return key.withUnsafeBufferPointer { key -> Int? in
            let last = text.count - key.count
            var start = 0
            while start <= last {
                guard let hit = memchr(base + start, Int32(key[0]), last - start + 1) else { return nil }
                let at = UnsafeRawPointer(hit) - UnsafeRawPointer(base)
                if base[at + 1] == key[1] && memcmp(base + at, key.baseAddress!, key.count) == 0 {
                    return at + key.count
                }
                start = at + 1
            }
            return nil
        }
    }

    /// The bytes a server's unmasked frame with a payload of `count` bytes takes on the wire.
    static func frameBytes(payload count: Int) -> Int {
        count + (count <= 125 ? 2 : count <= 0xFFFF ? 4 : 10)
    }
}
