import ReceptionistModel
import ReceptionistWire

/// Maps a request to its reply, or to work for a job thread. Loop thread only.
final class Router {
    private let staticFiles: StaticFiles
    private let storeAPI: StoreAPI
    private let jobAPI: JobAPI
    /// Whether the gateway accepts work (false while draining).
    private let isReady: () -> Bool
    // Constant answers are built once; copies share their storage.
    private let healthy = Reply(.json(.ok, "{\"status\":\"ok\"}"))
    private let ready = Reply(.json(.ok, "{\"status\":\"ready\"}"))
    private let draining = Reply(.json(.serviceUnavailable, "{\"status\":\"draining\"}"))

    init(staticFiles: StaticFiles, stores: StoreRegistry, jobs: JobRunner, isReady: @escaping () -> Bool) {
        self.staticFiles = staticFiles
        storeAPI = StoreAPI(stores: stores)
        jobAPI = JobAPI(stores: stores, jobs: jobs)
        self.isReady = isReady
    }

    func route(_ request: HTTPRequest) -> RouteResult {
        switch request.rawPath {
        case "/healthz":
            return .reply(readOnly(request) { healthy })
        case "/readyz":
            return .reply(readOnly(request) { isReady() ? ready : draining })
        default:
            break
        }
        let api: APIPath?
        do {
            api = try APIPath(request)
        } catch {
            return .reply(Reply(.error(.badRequest, "the path is not allowed: \(error)"), closesConnection: true))
        }
        guard let segments = api?.segments else {
            return .reply(readOnly(request) { staticFiles.reply(for: request) })
        }
        switch segments.first {
        case "stores": return storeAPI.route(request, segments.dropFirst())
        case "jobs": return jobAPI.route(request, segments.dropFirst())
        default: return .reply(.error(.notFound, "no such API resource"))
        }
    }

    private func readOnly(_ request: HTTPRequest, _ body: () -> Reply) -> Reply {
        switch request.method {
        case .get, .head: body()
        default: .methodNotAllowed(request.method, allow: "GET, HEAD")
        }
    }
}
