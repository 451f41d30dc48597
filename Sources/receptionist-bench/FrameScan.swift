import Glibc

/// Byte scans over a server frame's text instead of a JSON parse: a client must stay cheaper than
/// the server it measures.
enum FrameScan {
    /// A key to look for (`"sentAt":`, quotes and colon included), and which of its bytes a search
    /// looks for first: the rarest in JSON text by a fixed ranking, a capital before a lowercase
    /// letter uncommon in English before anything else.
    ///
    /// Looking for the quote that begins every key stopped at every string of a frame, so a
    /// message wrapped in an envelope (`type`, `topic`, `seq`, `publishedAt`, then `data`) cost
    /// the client ten stops more than the bare body a peer relays: a difference of the bench
    /// client, not of the servers it compares.
    struct Key {
        let bytes: [UInt8]
        /// Index in `bytes` of the byte searched for first.
        let anchor: Int

        init(_ text: String) {
            let bytes = Array(text.utf8)
            precondition(!bytes.isEmpty, "a key has bytes")
            self.bytes = bytes
            anchor = bytes.indices.min { Self.rank(bytes[$0]) < Self.rank(bytes[$1]) }!
        }

        /// Lowercase letters from the least to the most common in English text.
        private static let uncommonFirst = Array("zqxjkvbpygfwmucldrhsnioate".utf8)

        private static func rank(_ byte: UInt8) -> Int {
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { return 0 }
            if let index = uncommonFirst.firstIndex(of: byte) { return 1 + index }
            return 100
        }
    }

    static func hasPrefix(_ text: UnsafeBufferPointer<UInt8>, _ prefix: [UInt8]) -> Bool {
        guard let base = text.baseAddress, text.count >= prefix.count else { return prefix.isEmpty }
        return memcmp(base, prefix, prefix.count) == 0
    }

    /// The text up to its first `[`: a `changes` frame's members before the list of changes, where
    /// its version and commit times are.
    static func head(_ text: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        guard let base = text.baseAddress, let bracket = memchr(base, Int32(UInt8(ascii: "[")), text.count) else {
            return text
        }
        return UnsafeBufferPointer(start: base, count: UnsafeRawPointer(bracket) - UnsafeRawPointer(base))
    }

    /// The whole number that follows the first `key` (such as `"sentAt":`), if any.
    static func number(after key: Key, in text: UnsafeBufferPointer<UInt8>) -> Int64? {
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
    static func flag(after key: Key, in text: UnsafeBufferPointer<UInt8>) -> Bool? {
        guard let position = end(of: key, in: text), position < text.count else { return nil }
        switch text[position] {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: return nil
        }
    }

    /// Where the text after the first occurrence of `key` starts, if it occurs: `memchr` to each
    /// candidate anchor byte, and `memcmp` of the whole key around it. Occurrences are met in
    /// order, since each has its anchor at the same offset.
    static func end(of key: Key, in text: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let base = text.baseAddress, text.count >= key.bytes.count else { return nil }
        let anchorByte = Int32(key.bytes[key.anchor])
        return key.bytes.withUnsafeBufferPointer { bytes -> Int? in
            // The last place a whole key can start.
            let last = text.count - bytes.count
            var start = 0
            while start <= last {
                // The anchors of keys starting at `start` through `last`.
                guard let hit = memchr(base + start + key.anchor, anchorByte, last - start + 1) else { return nil }
                let at = (UnsafeRawPointer(hit) - UnsafeRawPointer(base)) - key.anchor
                if memcmp(base + at, bytes.baseAddress!, bytes.count) == 0 { return at + bytes.count }
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
