/// An incremental UTF-8 checker that fails on the first byte that makes the input invalid.
///
/// WebSocket text may be split anywhere, even inside a code point, and RFC 6455 section 8.1 asks
/// an endpoint to fail the connection as soon as the text cannot be valid. So this keeps only the
/// state of the unfinished sequence between calls, and it narrows the range allowed for the
/// second byte of a sequence (Unicode table 3-7): that is where overlong forms, surrogates
/// (U+D800-DFFF) and code points past U+10FFFF show, one byte after their lead byte.
public struct UTF8Validator: Sendable, Equatable {
    /// False from the first byte that no valid UTF-8 text could contain; it stays false.
    public private(set) var isValid = true
    /// Continuation bytes still owed by the current sequence.
    private var owed: UInt8 = 0
    /// Bounds of the next continuation byte; only the second byte of a sequence is narrower than 80-BF.
    private var low: UInt8 = 0x80
    private var high: UInt8 = 0xBF

    public init() {}

    /// Whether the input so far is valid and ends on a whole code point.
    public var isComplete: Bool { isValid && owed == 0 }

    /// Checks the next bytes; returns `isValid`.
    @discardableResult
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard isValid else { return false }
        let count = bytes.count
        var index = 0
        while index < count {
            if owed == 0 {
                // Text is mostly ASCII: step over it eight bytes at a time.
                while index + 8 <= count,
                    bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
                {
                    index += 8
                }
                guard index < count else { break }
                let byte = bytes[index]
                index += 1
                if byte < 0x80 { continue }
                guard begin(byte) else {
                    isValid = false
                    return false
                }
            } else {
                let byte = bytes[index]
                index += 1
                guard byte >= low && byte <= high else {
                    isValid = false
                    return false
                }
                owed -= 1
                low = 0x80
                high = 0xBF
            }
        }
        return true
    }

    /// Convenience for callers holding an array.
    @discardableResult
    public mutating func feed(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Forgets everything, ready for the next text.
    public mutating func reset() {
        self = UTF8Validator()
    }

    /// Whether `bytes` are, on their own, complete valid UTF-8.
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var validator = UTF8Validator()
        return validator.feed(bytes) && validator.isComplete
    }

    /// Sets up the sequence a lead byte starts; false when the byte cannot lead one.
    private mutating func begin(_ lead: UInt8) -> Bool {
        switch lead {
        case 0xC2...0xDF:
            owed = 1
        case 0xE0:
            owed = 2
            low = 0xA0  // below: overlong three-byte forms
        case 0xE1...0xEC, 0xEE...0xEF:
            owed = 2
        case 0xED:
            owed = 2
            high = 0x9F  // above: surrogates
        case 0xF0:
            owed = 3
            low = 0x90  // below: overlong four-byte forms
        case 0xF1...0xF3:
            owed = 3
        case 0xF4:
            owed = 3
            high = 0x8F  // above: past U+10FFFF
        default:
            // 80-BF continue a sequence that never started; C0, C1 and F5-FF are never valid.
            return false
        }
        return true
    }
}
