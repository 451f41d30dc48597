/// An HTTP status code with its reason phrase.
public struct HTTPStatus: Sendable, Hashable {
    public let code: Int
    public let reason: String
    /// The `error` name when the code alone does not say it (503 is the gateway over its limits,
    /// or a service it needs unreachable).
    private let name: String?

    public init(code: Int, reason: String) {
        self.code = code
        self.reason = reason
        name = nil
    }

    private init(code: Int, reason: String, errorName: String) {
        self.code = code
        self.reason = reason
        name = errorName
    }

    public static let ok = HTTPStatus(code: 200, reason: "OK")
    public static let created = HTTPStatus(code: 201, reason: "Created")
    public static let accepted = HTTPStatus(code: 202, reason: "Accepted")
    public static let noContent = HTTPStatus(code: 204, reason: "No Content")
    public static let switchingProtocols = HTTPStatus(code: 101, reason: "Switching Protocols")
    public static let notModified = HTTPStatus(code: 304, reason: "Not Modified")
    public static let badRequest = HTTPStatus(code: 400, reason: "Bad Request")
    public static let unauthorized = HTTPStatus(code: 401, reason: "Unauthorized")
    public static let forbidden = HTTPStatus(code: 403, reason: "Forbidden")
    public static let notFound = HTTPStatus(code: 404, reason: "Not Found")
    public static let methodNotAllowed = HTTPStatus(code: 405, reason: "Method Not Allowed")
    public static let requestTimeout = HTTPStatus(code: 408, reason: "Request Timeout")
    public static let conflict = HTTPStatus(code: 409, reason: "Conflict")
    public static let gone = HTTPStatus(code: 410, reason: "Gone")
    public static let preconditionFailed = HTTPStatus(code: 412, reason: "Precondition Failed")
    public static let payloadTooLarge = HTTPStatus(code: 413, reason: "Payload Too Large")
    public static let upgradeRequired = HTTPStatus(code: 426, reason: "Upgrade Required")
    public static let tooManyRequests = HTTPStatus(code: 429, reason: "Too Many Requests")
    public static let headerFieldsTooLarge = HTTPStatus(code: 431, reason: "Request Header Fields Too Large")
    public static let internalServerError = HTTPStatus(code: 500, reason: "Internal Server Error")
    public static let notImplemented = HTTPStatus(code: 501, reason: "Not Implemented")
    /// A service the gateway needs (Redis) is unreachable, or did not say whether it took a write.
    public static let serviceUnavailable = HTTPStatus(code: 503, reason: "Service Unavailable")
    /// The gateway is over one of its own limits (connections, the job queue).
    public static let overCapacity = HTTPStatus(code: 503, reason: "Service Unavailable", errorName: "over_capacity")
    /// Durable storage refused a write (the disk is full); nothing was applied.
    public static let insufficientStorage = HTTPStatus(code: 507, reason: "Insufficient Storage")
    public static let versionNotSupported = HTTPStatus(code: 505, reason: "HTTP Version Not Supported")

    /// The short machine-readable name used as `error` in JSON error bodies.
    public var errorName: String {
        if let name { return name }
        return switch code {
        case 400: "bad_request"
        case 401: "unauthorized"
        case 403: "forbidden"
        case 404: "not_found"
        case 405: "method_not_allowed"
        case 408: "request_timeout"
        case 409: "conflict"
        case 410: "gone"
        case 412: "precondition_failed"
        case 413: "payload_too_large"
        case 426: "upgrade_required"
        case 429: "too_many_requests"
        case 431: "header_too_large"
        case 500: "internal_error"
        case 501: "not_implemented"
        case 503: "service_unavailable"
        case 505: "version_not_supported"
        case 507: "insufficient_storage"
        default: "error"
        }
    }
}
