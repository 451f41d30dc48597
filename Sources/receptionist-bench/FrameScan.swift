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
        guard text.count > key.count else { return nil }
        var i = 0
        search: while i <= text.count - key.count {
            for j in key.indices where text[i + j] != key[j] {
                i += 1
                continue search
            }
            var position = i + key.count
            var value: Int64 = 0
            var digits = 0
            while position < text.count, text[position] >= 48, text[position] <= 57 {
                value = value * 10 + Int64(text[position] - 48)
                position += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        return nil
    }

    /// The bytes a server's unmasked frame with a payload of `count` bytes takes on the wire.
    static func frameBytes(payload count: Int) -> Int {
        count + (count <= 125 ? 2 : count <= 0xFFFF ? 4 : 10)
    }
}
