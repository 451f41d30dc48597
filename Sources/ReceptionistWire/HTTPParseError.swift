/// Why a request stream was rejected. After any of these the stream cannot be trusted and is closed.
public struct HTTPParseError: Error, Sendable, Hashable {
    public let status: HTTPStatus
    public let detail: String

    public init(status: HTTPStatus, detail: String) {
        self.status = status
        self.detail = detail
    }
}
