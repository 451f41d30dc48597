/// The framing of a chunked request body (RFC 9112, section 7.1), read strictly, byte by byte,
/// beside http-parser. http-parser as packaged is lenient: it takes any byte after a CR as the
/// LF, and anything after a chunk's size as an extension, so that "2\rX{}" or "0\r\n\rX" is a
/// whole body to it and something else to a stricter peer. The decoder feeds every body byte
/// http-parser took through this check, and refuses the request unless both agree on the body
/// and where it ends.
///
/// Grammar: `chunk-size [ BWS ";" extension ] CRLF`, then the chunk's data and CRLF, until a size
/// of 0; then trailer lines and an empty line. A trailer line, and the last empty one, may end in
/// a bare LF, as a head's lines may; every CR is followed by LF. Extensions and trailers are not
/// read, only their bytes checked: visible characters, spaces and tabs.
///
/// Pure value.
struct ChunkedFraming {
    private enum State {
        case size(digits: Int)
        case spaceAfterSize
        case extensionBytes
        case sizeLineFeed
        case data
        case dataCarriageReturn
        case dataLineFeed
        case trailerLineStart
        case trailerLine
        case trailerLineFeed
        case endLineFeed
        case done
    }

    private var state = State.size(digits: 0)
    private var size: UInt64 = 0
    /// The data of the chunks before the current one, and the most the body may hold.
    private var total: UInt64 = 0
    private let maxBodyBytes: UInt64
    /// The refusal was of a size that takes the body past `maxBodyBytes`, not of malformed framing.
    private(set) var tooLarge = false

    /// `maxBodyBytes`: a chunk's size that takes the body past it is refused as it is read, before
    /// any of its data, so the refusal does not depend on how the stream was split into reads.
    init(maxBodyBytes: UInt64 = .max) {
        self.maxBodyBytes = maxBodyBytes
    }
    /// Data bytes still due in the current chunk.
    private var dataLeft: UInt64 = 0

    /// The body and its trailers are whole: nothing more belongs to this message.
    var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// Checks the next `bytes` of the body; false at the first one the grammar does not allow
    /// (and for any byte after the end).
    mutating func take(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index < bytes.count {
            if case .data = state {
                // A chunk's data is skipped whole, not looked at.
                let skipped = Int(min(UInt64(bytes.count - index), dataLeft))
                dataLeft -= UInt64(skipped)
                index += skipped
                if dataLeft == 0 { state = .dataCarriageReturn }
                continue
            }
            guard take(byte: bytes[index]) else { return false }
            index += 1
        }
        return true
    }

    private mutating func take(byte: UInt8) -> Bool {
        switch state {
        case .size(let digits):
            if let value = RequestPath.hexValue(byte) {
                // More than 16 significant digits cannot be a size.
                guard size >> 60 == 0 else { return false }
                size = size << 4 | UInt64(value)
                guard size <= maxBodyBytes - total else {
                    tooLarge = true
                    return false
                }
                state = .size(digits: digits + 1)
                return true
            }
            guard digits > 0 else { return false }
            switch byte {
            case UInt8(ascii: "\r"): state = .sizeLineFeed
            case UInt8(ascii: ";"): state = .extensionBytes
            case UInt8(ascii: " "), UInt8(ascii: "\t"): state = .spaceAfterSize
            default: return false
            }
        case .spaceAfterSize:
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"): break
            case UInt8(ascii: ";"): state = .extensionBytes
            default: return false
            }
        case .extensionBytes:
            if byte == UInt8(ascii: "\r") {
                state = .sizeLineFeed
            } else if !Self.isFieldByte(byte) {
                return false
            }
        case .sizeLineFeed:
            guard byte == UInt8(ascii: "\n") else { return false }
            if size == 0 {
                state = .trailerLineStart
            } else {
                total += size
                dataLeft = size
                state = .data
            }
            size = 0
        case .data:
            return false
        case .dataCarriageReturn:
            guard byte == UInt8(ascii: "\r") else { return false }
            state = .dataLineFeed
        case .dataLineFeed:
            guard byte == UInt8(ascii: "\n") else { return false }
            state = .size(digits: 0)
        case .trailerLineStart:
            switch byte {
            case UInt8(ascii: "\r"): state = .endLineFeed
            case UInt8(ascii: "\n"): state = .done
            default:
                guard Self.isFieldByte(byte) else { return false }
                state = .trailerLine
            }
        case .trailerLine:
            switch byte {
            case UInt8(ascii: "\r"): state = .trailerLineFeed
            case UInt8(ascii: "\n"): state = .trailerLineStart
            default: guard Self.isFieldByte(byte) else { return false }
            }
        case .trailerLineFeed:
            guard byte == UInt8(ascii: "\n") else { return false }
            state = .trailerLineStart
        case .endLineFeed:
            guard byte == UInt8(ascii: "\n") else { return false }
            state = .done
        case .done:
            return false
        }
        return true
    }

    /// A byte a field or extension may hold: visible characters, obs-text, space and tab.
    private static func isFieldByte(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\t") || (byte >= 0x20 && byte != 0x7F)
    }
}
