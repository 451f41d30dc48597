import ReceptionistModel
import ReceptionistWire

/// Maps a request to its reply, or to work for a job thread. Loop thread only.
final class Router {
    private let staticFiles: StaticFiles
    private let storeAPI: StoreAPI
    private let jobAPI: JobAPI
    private let topicAPI: TopicAPI
    private let hub: PushHub
    private let enableEcho: Bool
    /// Whether the gateway accepts work (false while draining).
    private let isReady: () -> Bool
    // Constant answers are built once; copies share their storage.
    private let healthy = Reply(.json(.ok, "{\"status\":\"ok\"}"))
    private let ready = Reply(.json(.ok, "{\"status\":\"ready\"}"))
    private let draining = Reply(.json(.serviceUnavailable, "{\"status\":\"draining\"}"))

    init(
        staticFiles: StaticFiles, stores: StoreRegistry, jobs: JobRunner, hub: PushHub, enableEcho: Bool,
        isReady: @escaping () -> Bool
    ) {
        self.staticFiles = staticFiles
        storeAPI = StoreAPI(stores: stores)
        jobAPI = JobAPI(stores: stores, jobs: jobs)
        topicAPI = TopicAPI(hub: hub)
        self.hub = hub
        self.enableEcho = enableEcho
        self.isReady = isReady
    }

    func route(_ request: HTTPRequest) -> RouteResult {
        switch request.rawPath {
        case "/healthz":
            return .reply(readOnly(request) { healthy })
        case "/readyz":
            return .reply(readOnly(request) { isReady() ? (hub.cluster?.readiness ?? ready) : draining })
        case "/ws":
            return upgrade(request, .push)
        case "/ws/echo" where enableEcho:
            return upgrade(request, .echo)
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
        case "stores" where segments.count == 3 && segments[2] == "events":
            guard request.method == .get else { return .reply(.methodNotAllowed(request.method, allow: "GET")) }
            guard isReady() else { return .reply(draining) }
            return StreamRequest.route(request, target: .store(segments[1]), hub: hub)
        case "stores": return storeAPI.route(request, segments.dropFirst())
        case "topics": return topicAPI.route(request, segments.dropFirst())
        case "jobs": return jobAPI.route(request, segments.dropFirst())
        default: return .reply(.error(.notFound, "no such API resource"))
        }
    }

    private func upgrade(_ request: HTTPRequest, _ mode: WebSocketSession.Mode) -> RouteResult {
        guard request.method == .get else { return .reply(.methodNotAllowed(request.method, allow: "GET")) }
        // A draining gateway takes no new streams; clients reconnect to another node.
        guard isReady() else { return .reply(draining) }
        return .upgrade(mode)
    }

    private func readOnly(_ request: HTTPRequest, _ body: () -> Reply) -> Reply {
        switch request.method {
        case .get, .head: body()
        default: .methodNotAllowed(request.method, allow: "GET, HEAD")
        }
    }
}
