/// A strict byte-level check of one request head, run ahead of the C parser.
///
/// http-parser as packaged is built lenient: it accepts a double space in the request line, a
/// misspelt protocol name, spaces inside header names and lines with no colon. Any of those lets
/// two parties read one stream differently, so this scanner refuses them. It also counts the
/// head's bytes exactly, for the head-size limit.
///
/// Grammar (RFC 9112 §3 and §5): `method SP target SP HTTP/d.d CRLF *(field-name ":" value CRLF) CRLF`,
/// with a bare LF accepted wherever CRLF is, as http-parser does. Obsolete line folding is refused.
struct HTTPHeadScanner {
    enum Result: Equatable {
        /// The head continues past these bytes.
        case needMore
        /// The head ends at this index (exclusive) of the scanned buffer.
        case complete(end: Int)
        /// The byte at this index of the scanned buffer breaks the grammar.
        case invalid(String, at: Int)
        /// The byte at this index of the scanned buffer takes the head over the limit.
        case tooLarge(at: Int)
    }

    private enum State {
        case leadingLines, method, target, version(Int), lineLF
        case fieldStart, fieldName, fieldValue, fieldLF, endLF
    }

    /// `#` stands for a digit.
    private static let versionPattern: StaticString = "HTTP/#.#"

    let maxBytes: Int
    private var state = State.leadingLines
    private(set) var byteCount = 0

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }

    mutating func reset() {
        state = .leadingLines
        byteCount = 0
    }

    mutating func scan(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Result {
        var next = start
        while next < bytes.count {
            next = skipPlainRun(bytes, from: next)
            guard next < bytes.count else { break }
            let index = next
            next += 1
            let byte = bytes[index]
            byteCount += 1
            if byteCount > maxBytes { return .tooLarge(at: index) }
            switch state {
            case .leadingLines:
                if byte == 13 || byte == 10 { continue }
                guard Self.isTokenByte(byte) else { return .invalid("malformed request line", at: index) }
                state = .method
            case .method:
                if byte == 32 {
                    state = .target
                } else if !Self.isTokenByte(byte) {
                    return .invalid("malformed request method", at: index)
                }
            case .target:
                if byte == 32 {
                    state = .version(0)
                } else if byte <= 32 || byte >= 127 {
                    return .invalid("malformed request target", at: index)
                }
            case .version(let matched):
                if matched == Self.versionPattern.utf8CodeUnitCount {
                    if byte == 13 { state = .lineLF } else if byte == 10 { state = .fieldStart } else {
                        return .invalid("malformed request line", at: index)
                    }
                    continue
                }
                let expected = Self.versionPattern.utf8Start[matched]
                let matches = expected == UInt8(ascii: "#") ? (48...57).contains(byte) : byte == expected
                guard matches else { return .invalid("malformed HTTP version", at: index) }
                state = .version(matched + 1)
            case .lineLF, .fieldLF:
                guard byte == 10 else { return .invalid("CR not followed by LF", at: index) }
                state = .fieldStart
            case .fieldStart:
                if byte == 13 {
                    state = .endLF
                } else if byte == 10 {
                    return finish(at: index + 1)
                } else if Self.isTokenByte(byte) {
                    state = .fieldName
                } else {
                    return .invalid(byte == 32 || byte == 9 ? "obsolete line folding" : "malformed header name", at: index)
                }
            case .fieldName:
                if byte == UInt8(ascii: ":") {
                    state = .fieldValue
                } else if !Self.isTokenByte(byte) {
                    return .invalid("malformed header name", at: index)
                }
            case .fieldValue:
                if byte == 13 {
                    state = .fieldLF
                } else if byte == 10 {
                    state = .fieldStart
                } else if byte < 32 && byte != 9 || byte == 127 {
                    return .invalid("control character in header value", at: index)
                }
            case .endLF:
                guard byte == 10 else { return .invalid("CR not followed by LF", at: index) }
                return finish(at: index + 1)
            }
        }
        return .needMore
    }

    /// Inside a method, a request target, a field name or a field value, the bytes that only
    /// continue it (most of a head) are passed over as a run and counted at once, instead of one
    /// turn of the state machine each. A run stops short of the size limit, so the byte that
    /// crosses it is reported as ever.
    private mutating func skipPlainRun(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        var index = start
        switch state {
        case .method, .fieldName:
            let end = runEnd(bytes, from: start)
            while index < end, Self.isTokenByte(bytes[index]) { index += 1 }
        case .target:
            let end = runEnd(bytes, from: start)
            while index < end, bytes[index] > 32 && bytes[index] < 127 { index += 1 }
        case .fieldValue:
            let end = runEnd(bytes, from: start)
            while index < end, bytes[index] >= 32 && bytes[index] != 127 || bytes[index] == 9 { index += 1 }
        default:
            return start
        }
        byteCount += index - start
        return index
    }

    /// Where a run from `start` must stop: the buffer's end, or the last byte the limit allows.
    private func runEnd(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        min(bytes.count, start + max(0, maxBytes - byteCount))
    }

    private mutating func finish(at end: Int) -> Result {
        state = .leadingLines
        return .complete(end: end)
    }

    /// RFC 9110 §5.6.2 tchar: `!#$%&'*+-.^_`|~`, digits and letters, as two 64-bit masks (bytes
    /// 0–63 and 64–127): one shift and test a byte, where a switch over the ranges took a dozen
    /// comparisons for every byte of every method and header name.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        let mask: UInt64 = byte < 64 ? 0x03FF_6CFA_0000_0000 : byte < 128 ? 0x57FF_FFFF_C7FF_FFFE : 0
        return mask >> UInt64(byte & 63) & 1 == 1
    }
}
