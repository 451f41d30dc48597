import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// `GET /api/topics/{topic}/presence` and `GET /api/stores/{store}/presence`: who subscribes on
/// this node (`docs/PROTOCOL.md`, Presence). The router has checked the API key.
///
/// Loop thread only.
struct PresenceAPI {
    let hub: PushHub
    let stores: StoreRegistry

    /// The most members one answer lists (`?limit=`), and how many it lists when not asked.
    static let maxLimit = 10_000
    static let defaultLimit = 1_000

    /// In a cluster the answer waits on the loop for the other nodes' entries in Redis.
    func reply(_ request: HTTPRequest, _ target: StreamTarget) -> RouteResult {
        guard request.method == .get || request.method == .head else { return .reply(.methodNotAllowed(request.method, allow: "GET, HEAD")) }
        switch target {
        // A name none can have was refused with the path (`APIRequestCheck`).
        case .store(let name) where stores.store(name) == nil:
            return .reply(.error(.notFound, "no store named '\(name)'"))
        default:
            break
        }
        var limit = Self.defaultLimit
        if let text = StreamRequest.query(request, "limit") {
            guard let asked = Int(text), (0...Self.maxLimit).contains(asked) else {
                return .reply(.error(.badRequest, "limit must be a whole number from 0 to \(Self.maxLimit)"))
            }
            limit = asked
        }
        let statsText = StreamRequest.query(request, "stats")
        guard let stats = QueryFlag.value(statsText) else {
            return .reply(.error(.badRequest, QueryFlag.problem("stats", statsText ?? "")))
        }
        let hub = self.hub
        guard let source = hub.presenceRelay.source else {
            let body: [UInt8]
            if let presence = hub.presence(of: target) {
                body = stats ? presence.statsReply() : presence.reply(limit: limit)
            } else {
                body = Presence.emptyReply(target, stats: stats)
            }
            return .reply(Self.answer(body))
        }
        return .later { done in
            source.readPresence(target) { entries in
                guard let entries else {
                    return done(.error(.serviceUnavailable, "the other nodes' presence could not be read from Redis"))
                }
                let body = Presence.clusterReply(target, local: hub.presence(of: target), entries: entries, limit: limit, stats: stats)
                done(Self.answer(body))
            }
        }
    }

    private static func answer(_ body: [UInt8]) -> Reply {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Cache-Control", "no-store")
        return Reply(HTTPResponse(status: .ok, headers: headers, body: body))
    }
}
