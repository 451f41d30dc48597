/// Where the members of an object, or the elements of an array, lie in compact JSON text (as
/// `JSONParser.compact` writes it: valid, with no whitespace outside strings), so that a value
/// can be passed on as the very bytes its writer sent instead of being parsed and written again.
///
/// Pure: bytes in, ranges out. The text must already be valid; anything else gives nil.
public enum JSONSpans {
    /// The members of the object that `text[range]` holds, in order: each key, decoded, and the
    /// range of its value's text.
    public static func members(of text: [UInt8], in range: Range<Int>) -> [(key: String, value: Range<Int>)]? {
        guard range.count >= 2, text[range.lowerBound] == UInt8(ascii: "{"), text[range.upperBound - 1] == UInt8(ascii: "}")
        else { return nil }
        var result: [(key: String, value: Range<Int>)] = []
        // Room for a typical message's members: grown one by one, the array is made three times.
        result.reserveCapacity(8)
        var index = range.lowerBound + 1
        let end = range.upperBound - 1
        while index < end {
            guard text[index] == UInt8(ascii: "\""), let keyEnd = endOfValue(text, from: index, limit: end),
                  keyEnd < end, text[keyEnd] == UInt8(ascii: ":"), let key = value(of: text, in: index..<keyEnd)?.stringValue
            else { return nil }
            let valueStart = keyEnd + 1
            guard let valueEnd = endOfValue(text, from: valueStart, limit: end) else { return nil }
            result.append((key, valueStart..<valueEnd))
            index = valueEnd
            if index < end {
                guard text[index] == UInt8(ascii: ",") else { return nil }
                index += 1
            }
        }
        return result
    }

    /// The value whose text is `text[range]` (a member's key or value, an element). A string
    /// without an escape is its bytes (the text is valid, so they are UTF-8), taken as they lie;
    /// anything else is parsed.
    public static func value(of text: [UInt8], in range: Range<Int>) -> JSONValue? {
        if range.count >= 2, text[range.lowerBound] == UInt8(ascii: "\"") {
            let inside = text[(range.lowerBound + 1)..<(range.upperBound - 1)]
            if !inside.contains(UInt8(ascii: "\\")) { return .string(String(decoding: inside, as: UTF8.self)) }
        }
        return try? JSONParser.parse(Array(text[range]))
    }

    /// The ranges of the elements of the array that `text[range]` holds, in order.
    public static func elements(of text: [UInt8], in range: Range<Int>) -> [Range<Int>]? {
        guard range.count >= 2, text[range.lowerBound] == UInt8(ascii: "["), text[range.upperBound - 1] == UInt8(ascii: "]")
        else { return nil }
        var result: [Range<Int>] = []
        var index = range.lowerBound + 1
        let end = range.upperBound - 1
        while index < end {
            guard let valueEnd = endOfValue(text, from: index, limit: end) else { return nil }
            result.append(index..<valueEnd)
            index = valueEnd
            if index < end {
                guard text[index] == UInt8(ascii: ",") else { return nil }
                index += 1
            }
        }
        return result
    }

    /// The index just past the value that starts at `start`, no further than `limit`.
    private static func endOfValue(_ text: [UInt8], from start: Int, limit: Int) -> Int? {
        guard start < limit, limit <= text.count else { return nil }
        // Read in place: the array's checked subscript cost each byte several times the test.
        return text.withUnsafeBufferPointer { endOfValue($0, from: start, limit: limit) }
    }

    private static func endOfValue(_ text: UnsafeBufferPointer<UInt8>, from start: Int, limit: Int) -> Int? {
        var depth = 0
        var inString = false
        var escaped = false
        var index = start
        while index < limit {
            let byte = text[index]
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 0 { return index + 1 }
                }
            } else {
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return index + 1 }
                    if depth < 0 { return index }
                case UInt8(ascii: ","), UInt8(ascii: ":"):
                    if depth == 0 { return index }
                default: break
                }
            }
            index += 1
        }
        return depth == 0 && !inString ? limit : nil
    }
}
