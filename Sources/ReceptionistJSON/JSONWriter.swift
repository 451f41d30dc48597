/// Encodes `JSONValue`s as compact JSON text: numbers as their literals, members in their order.
public enum JSONWriter {
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(value, to: &out)
        return out
    }

    public static func string(_ value: JSONValue) -> String {
        String(decoding: encode(value), as: UTF8.self)
    }

    public static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: flag ? "true".utf8 : "false".utf8)
        case .number(let number): number.write(to: &out)
        case .string(let text): writeString(text, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, member)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                write(member, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// `value`'s decimal digits, appended: the generic `String(_:)` for integers is several times
    /// slower, and makes a string only to be copied.
    public static func writeDecimal(_ value: UInt64, to out: inout [UInt8]) {
        writeDecimal(value, negative: false, to: &out)
    }

    /// `magnitude`'s decimal digits, after a minus sign if `negative`, built on the stack and
    /// appended at once.
    static func writeDecimal(_ magnitude: UInt64, negative: Bool, to out: inout [UInt8]) {
        if negative { out.append(UInt8(ascii: "-")) }
        // Up to three digits (a RESP length, a status, most counts) appended one by one: the
        // stack buffer's single copy costs more than they do.
        if magnitude < 1_000 {
            let small = Int(magnitude)
            if small >= 100 { out.append(UInt8(truncatingIfNeeded: small / 100) &+ UInt8(ascii: "0")) }
            if small >= 10 { out.append(UInt8(truncatingIfNeeded: small / 10 % 10) &+ UInt8(ascii: "0")) }
            out.append(UInt8(truncatingIfNeeded: small % 10) &+ UInt8(ascii: "0"))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { raw in
            let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let count = writeDecimal(magnitude, at: base)
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: count))
        }
    }

    /// `value`'s decimal digits, written from `start` (which has room for `decimalCount(value)`);
    /// returns how many.
    public static func writeDecimal(_ value: UInt64, at start: UnsafeMutablePointer<UInt8>) -> Int {
        let count = JSONBuffer.digitCount(value)
        JSONBuffer.writeDigits(value, endingAt: start + count)
        return count
    }

    /// How many decimal digits `value` has (1 for 0).
    public static func decimalCount(_ value: UInt64) -> Int {
        JSONBuffer.digitCount(value)
    }

    /// A literal's bytes, appended as one copy: `+= "…".utf8` walks the string's view generically
    /// (about 170 instructions for each piece of every message put together).
    public static func writeLiteral(_ text: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public static func writeString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: copied whole from the string's own bytes.
        let plain = text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if plain == true {
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
            case 0x0A: out.append(contentsOf: "\\n".utf8)
            case 0x0D: out.append(contentsOf: "\\r".utf8)
            case 0x09: out.append(contentsOf: "\\t".utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
