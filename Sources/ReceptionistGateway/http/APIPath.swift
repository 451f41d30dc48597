import ReceptionistWire

/// The decoded segments of an `/api/...` request path.
struct APIPath {
    let segments: [String]

    /// Nil if `raw` (a request's path, still percent-encoded) is not under `/api`, or cannot be
    /// decoded safely.
    init?(rawPath raw: Substring) throws(RequestPath.Problem) {
        // Compared as bytes in place: `String`'s comparisons normalise Unicode first, and the
        // UTF-8 view's generic `starts(with:)` cost a publish more than splitting its path.
        var prefix = raw
        let underAPI = prefix.withUTF8 { bytes in
            bytes.count >= 4 && bytes[0] == UInt8(ascii: "/") && bytes[1] == UInt8(ascii: "a")
                && bytes[2] == UInt8(ascii: "p") && bytes[3] == UInt8(ascii: "i")
                && (bytes.count == 4 || bytes[4] == UInt8(ascii: "/"))
        }
        guard underAPI else { return nil }
        // `api` taken off in place: the array is the path's own, so no copy is made.
        var segments = try RequestPath(raw: raw).segments
        segments.removeFirst()
        self.segments = segments
    }
}
