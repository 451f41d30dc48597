/// A strict RFC 8259 JSON parser: bytes in, a `JSONValue` or a positioned error out.
///
/// Numbers keep their literal text and objects their member order (a repeated member name keeps
/// its first place and its last value), so nothing the writer meant is lost.
public struct JSONParser {
    public struct Error: Swift.Error, Sendable, Equatable, CustomStringConvertible {
        public let offset: Int
        public let reason: String
        public var description: String { "\(reason) at byte \(offset)" }
    }

    /// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
    public static let maxDepth = 256

    public static func parse(_ bytes: [UInt8]) throws(Error) -> JSONValue {
        try run(bytes, building: true).value
    }

    /// `parse`, for what the gateway itself stored around values it took (a log entry wraps a
    /// model of `maxDepth` levels in a few more), read back: a value the gateway took is never
    /// refused on its way back.
    public static func parseStored(_ bytes: [UInt8]) throws(Error) -> JSONValue {
        try run(bytes, building: true, maxDepth: maxDepth + 16).value
    }

    /// `validate`, for what the gateway itself stored (as `parseStored`).
    public static func validateStored(_ bytes: [UInt8]) throws(Error) {
        _ = try run(bytes, building: false, maxDepth: maxDepth + 16)
    }

    /// Checks `bytes` as `parse` does, with the same errors, but builds no value: no member,
    /// element or plain string is made, only walked over.
    public static func validate(_ bytes: [UInt8]) throws(Error) {
        _ = try run(bytes, building: false)
    }

    /// The value (`null` unless `building`), and whether any whitespace lay outside strings.
    private static func run(_ bytes: [UInt8], building: Bool, maxDepth: Int = maxDepth) throws(Error) -> (value: JSONValue, spaced: Bool) {
        try bytes.withUnsafeBufferPointer { buffer throws(Error) in
            var parser = JSONParser(buffer, building: building, depthLimit: maxDepth)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw parser.error("unexpected data after the value") }
            return (value, parser.spaced)
        }
    }

    public static func parse(_ text: String) throws(Error) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Validates `bytes` as one JSON text and returns it without the whitespace outside strings:
    /// every other byte (member order, a number's digits, a string's escapes) is as it was sent.
    /// This is how a published payload is forwarded: checked, never re-encoded.
    public static func compact(_ bytes: [UInt8]) throws(Error) -> [UInt8] {
        // Text sent compact already (most is) is passed on as the very same array: nothing to drop.
        guard try run(bytes, building: false).spaced else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                out.append(byte)
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                continue
            } else {
                if byte == UInt8(ascii: "\"") { inString = true }
                out.append(byte)
            }
        }
        return out
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    /// False when only validating: objects, arrays, numbers and plain strings are checked and
    /// skipped, and their values come back empty (`null`, `""`). Every check is the same.
    private let building: Bool
    /// Whether whitespace outside strings was skipped anywhere.
    private var spaced = false
    private let depthLimit: Int

    private init(_ bytes: UnsafeBufferPointer<UInt8>, building: Bool, depthLimit: Int) {
        self.bytes = bytes
        self.building = building
        self.depthLimit = depthLimit
    }

    private func error(_ reason: String) -> Error {
        Error(offset: index, reason: reason)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) {
            index += 1
            spaced = true
        }
    }

    private mutating func parseValue(depth: Int) throws(Error) -> JSONValue {
        guard depth < depthLimit else { throw error("nesting deeper than \(depthLimit)") }
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let literal = try scanNumber()
            return building ? .number(JSONNumber(validLiteral: literal)) : .null
        default: throw error("unexpected character")
        }
    }

    private mutating func expect(_ literal: StaticString) throws(Error) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("unexpected end of input") }
        for i in 0..<count where bytes[index + i] != literal.utf8Start[i] {
            throw error("invalid literal")
        }
        index += count
    }

    private mutating func parseObject(depth: Int) throws(Error) -> JSONValue {
        index += 1
        var members = JSONObject()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return building ? .object(members) : .null
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth + 1)
            if building { members[key] = value }
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return building ? .object(members) : .null
            } else {
                throw error("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(Error) -> JSONValue {
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return building ? .array(elements) : .null
        }
        while true {
            skipWhitespace()
            let element = try parseValue(depth: depth + 1)
            if building { elements.append(element) }
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return building ? .array(elements) : .null
            } else {
                throw error("expected ',' or ']'")
            }
        }
    }

    /// The text of the number here, checked against the grammar.
    private mutating func scanNumber() throws(Error) -> UnsafeBufferPointer<UInt8> {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        // Kept as written: no range is imposed, and nothing is rounded.
        return UnsafeBufferPointer(rebasing: bytes[start..<index])
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= 48 && byte <= 57 }

    private mutating func parseString() throws(Error) -> String {
        index += 1
        // Most strings (keys, ids, colors) are plain ASCII with no escape: taken whole from the
        // input, with no byte-by-byte copy and no UTF-8 validation (ASCII is valid UTF-8).
        let start = index
        var scan = index
        while scan < bytes.count {
            let byte = bytes[scan]
            if byte == UInt8(ascii: "\"") {
                index = scan + 1
                return building ? String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<scan]), as: UTF8.self) : ""
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
            scan += 1
        }
        // The rest, byte by byte, from where the plain run ends.
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<scan]))
        index = scan
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8 in string") }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("unpaired surrogate")
                    }
                    out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                default:
                    throw error("invalid escape")
                }
            case 0..<0x20:
                throw error("control character in string")
            default:
                out.append(byte)
                index += 1
            }
        }
    }

    private mutating func parseHex4() throws(Error) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - 48)
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - 87)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - 55)
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }
}
