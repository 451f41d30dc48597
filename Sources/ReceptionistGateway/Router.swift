import ReceptionistWire

/// Maps a request to its reply. Loop thread only.
final class Router {
    private let staticFiles: StaticFiles
    // Constant answers are built once; copies share their storage.
    private let healthy = Reply(.json(.ok, "{\"status\":\"ok\"}"))
    private let ready = Reply(.json(.ok, "{\"status\":\"ready\"}"))
    private let draining = Reply(.json(.serviceUnavailable, "{\"status\":\"draining\"}"))
    /// Whether the gateway accepts work (false while draining).
    var isReady: () -> Bool

    init(staticFiles: StaticFiles, isReady: @escaping () -> Bool) {
        self.staticFiles = staticFiles
        self.isReady = isReady
    }

    func reply(to request: HTTPRequest) -> Reply {
        switch request.rawPath {
        case "/healthz":
            return readOnly(request) { healthy }
        case "/readyz":
            return readOnly(request) { isReady() ? ready : draining }
        default:
            return readOnly(request) { staticFiles.reply(for: request) }
        }
    }

    private func readOnly(_ request: HTTPRequest, _ body: () -> Reply) -> Reply {
        switch request.method {
        case .get, .head:
            return body()
        default:
            var headers = HTTPHeaders()
            headers.add("Allow", "GET, HEAD")
            return Reply(.error(.methodNotAllowed, "\(request.method.name) is not allowed here", headers: headers))
        }
    }
}
