import ReceptionistWire

/// The decoded segments of an `/api/...` request path.
struct APIPath {
    let segments: [String]

    /// Nil if the path is not under `/api`, or cannot be decoded safely.
    init?(_ request: HTTPRequest) throws(RequestPath.Problem) {
        let raw = request.rawPath
        guard raw == "/api" || raw.hasPrefix("/api/") else { return nil }
        segments = Array(try RequestPath(raw: raw).segments.dropFirst())
    }
}
