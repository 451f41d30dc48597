import ReceptionistWire

/// The decoded segments of an `/api/...` request path.
struct APIPath {
    let segments: [String]

    /// Nil if the path is not under `/api`, or cannot be decoded safely.
    init?(_ request: HTTPRequest) throws(RequestPath.Problem) {
        let raw = request.rawPath
        // Compared as bytes: `String`'s comparisons normalise Unicode first, on every request.
        guard raw.utf8.elementsEqual("/api".utf8) || raw.utf8.starts(with: "/api/".utf8) else { return nil }
        // `api` taken off in place: the array is the path's own, so no copy is made.
        var segments = try RequestPath(raw: raw).segments
        segments.removeFirst()
        self.segments = segments
    }
}
