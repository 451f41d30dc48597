/// A request path decoded into safe segments, or the reason it cannot be.
///
/// Decoding happens once, here, so no later code sees `%2e%2e`, a NUL or an encoded slash.
public struct RequestPath: Sendable, Hashable {
    public let segments: [String]

    public enum Problem: Error, Sendable, Equatable {
        case notAbsolute, badEncoding, nulByte, traversal
    }

    /// Parses a raw, percent-encoded path such as `/a/b%20c.txt`.
    ///
    /// Over the path's bytes in place: splitting and decoding through `Substring.UTF8View`'s
    /// indices cost every request more than the rest of its routing.
    public init(raw: Substring) throws(Problem) {
        var raw = raw
        let parsed: Result<[String], Problem> = raw.withUTF8 { bytes in
            Result { () throws(Problem) in try Self.segments(of: bytes) }
        }
        segments = try parsed.get()
    }

    private static func segments(of path: UnsafeBufferPointer<UInt8>) throws(Problem) -> [String] {
        guard path.first == UInt8(ascii: "/") else { throw .notAbsolute }
        var segments: [String] = []
        // As many segments as slashes at most: room for them all at once, not grown one by one.
        segments.reserveCapacity(path.reduce(0) { $1 == UInt8(ascii: "/") ? $0 + 1 : $0 })
        var start = 0
        while start < path.count {
            guard path[start] != UInt8(ascii: "/") else {
                start += 1
                continue
            }
            var end = start
            while end < path.count && path[end] != UInt8(ascii: "/") { end += 1 }
            segments.append(try segment(UnsafeBufferPointer(rebasing: path[start..<end])))
            start = end
        }
        return segments
    }

    /// One segment between slashes, decoded and checked.
    private static func segment(_ raw: UnsafeBufferPointer<UInt8>) throws(Problem) -> String {
        // Most segments have no escape: checked and made a string where they stand.
        if !raw.contains(UInt8(ascii: "%")) { return try checked(raw) }
        return try percentDecode(raw).withUnsafeBufferPointer { bytes throws(Problem) in try checked(bytes) }
    }

    /// A decoded segment, refused if it holds a NUL, a separator, or is not UTF-8, `.` or `..`.
    private static func checked(_ bytes: UnsafeBufferPointer<UInt8>) throws(Problem) -> String {
        var separator = false
        var ascii = true
        for byte in bytes {
            if byte == 0 { throw .nulByte }
            // An encoded slash or backslash would smuggle a separator past the split above.
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "\\") { separator = true }
            if byte >= 0x80 { ascii = false }
        }
        if separator { throw .traversal }
        guard ascii || UTF8Validator.isValid(UnsafeRawBufferPointer(bytes)) else { throw .badEncoding }
        // `.` and `..`, compared as bytes: a string comparison would normalise Unicode first.
        if bytes.count <= 2, bytes.allSatisfy({ $0 == UInt8(ascii: ".") }) { throw .traversal }
        // Valid UTF-8 by now, so decoding repairs nothing.
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A query-string value decoded: `%XX` escapes, and `+` as a space. Nil for a bad escape or
    /// bytes that are not UTF-8.
    public static func percentDecoded(_ raw: Substring) -> String? {
        let plus = raw.utf8.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 }
        let decoded: [UInt8]? = plus.withUnsafeBufferPointer { try? percentDecode($0) }
        guard let decoded else { return nil }
        return String(validating: decoded, as: UTF8.self)
    }

    private static func percentDecode(_ bytes: UnsafeBufferPointer<UInt8>) throws(Problem) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2])
                else { throw .badEncoding }
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(byte)
                i += 1
            }
        }
        return out
    }

    /// A hex digit's value, either case; nil for any other byte.
    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
