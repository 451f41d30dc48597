/// A request path decoded into safe segments, or the reason it cannot be.
///
/// Decoding happens once, here, so no later code sees `%2e%2e`, a NUL or an encoded slash.
public struct RequestPath: Sendable, Hashable {
    public let segments: [String]

    public enum Problem: Error, Sendable, Equatable {
        case notAbsolute, badEncoding, nulByte, traversal
    }

    /// Parses a raw, percent-encoded path such as `/a/b%20c.txt`.
    public init(raw: Substring) throws(Problem) {
        guard raw.first == "/" else { throw .notAbsolute }
        var segments: [String] = []
        for rawSegment in raw.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            let bytes = try Self.percentDecode(rawSegment)
            if bytes.contains(0) { throw .nulByte }
            // An encoded slash or backslash would smuggle a separator past the split above.
            if bytes.contains(UInt8(ascii: "/")) || bytes.contains(UInt8(ascii: "\\")) { throw .traversal }
            guard let segment = String(validating: bytes, as: UTF8.self) else { throw .badEncoding }
            if segment == ".." || segment == "." { throw .traversal }
            segments.append(segment)
        }
        self.segments = segments
    }

    /// A query-string value decoded: `%XX` escapes, and `+` as a space. Nil for a bad escape or
    /// bytes that are not UTF-8.
    public static func percentDecoded(_ raw: Substring) -> String? {
        let plus = raw.utf8.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 }
        guard let bytes = try? percentDecode(plus[...]) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func percentDecode<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(Problem) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i != bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%") {
                let h = bytes.index(after: i)
                guard h != bytes.endIndex, bytes.index(after: h) != bytes.endIndex,
                      let hi = hexValue(bytes[h]), let lo = hexValue(bytes[bytes.index(after: h)])
                else { throw .badEncoding }
                out.append(hi << 4 | lo)
                i = bytes.index(h, offsetBy: 2)
            } else {
                out.append(byte)
                i = bytes.index(after: i)
            }
        }
        return out
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
