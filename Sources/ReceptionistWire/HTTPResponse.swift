/// A response to encode: status, extra headers and body.
///
/// `Date`, `Content-Length` and `Connection` are added by the encoder, never by handlers.
public struct HTTPResponse: Sendable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response from already-encoded JSON text.
    public static func json(_ status: HTTPStatus, _ text: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var all = headers
        all.add("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: all, body: Array(text.utf8))
    }

    /// The gateway's uniform error body: `{"error": "...", "detail": "..."}`.
    public static func error(_ status: HTTPStatus, _ detail: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        json(status, "{\"error\":\(JSONText.quote(status.errorName)),\"detail\":\(JSONText.quote(detail))}", headers: headers)
    }

    public static func error(_ error: HTTPParseError) -> HTTPResponse {
        self.error(error.status, error.detail)
    }
}
