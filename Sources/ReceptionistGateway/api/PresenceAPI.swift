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

    func reply(_ request: HTTPRequest, _ target: StreamTarget) -> Reply {
        guard request.method == .get || request.method == .head else { return .methodNotAllowed(request.method, allow: "GET, HEAD") }
        switch target {
        case .store(let name) where stores.store(name) == nil:
            return .error(.notFound, "no store named '\(name)'")
        case .topic(let name) where !PushHub.isValidTopicName(name):
            return .error(.badRequest, "'\(name)' is not a valid topic name: use 1 to 64 of A-Z a-z 0-9 _ . -")
        default:
            break
        }
        var limit = Self.defaultLimit
        if let text = StreamRequest.query(request, "limit") {
            guard let asked = Int(text), (0...Self.maxLimit).contains(asked) else {
                return .error(.badRequest, "limit must be a whole number from 0 to \(Self.maxLimit)")
            }
            limit = asked
        }
        let stats: Bool
        switch StreamRequest.query(request, "stats") {
        case nil, "false": stats = false
        case "true", "": stats = true
        case let other?: return .error(.badRequest, "stats must be true or false, not '\(other)'")
        }
        let body: [UInt8]
        if let presence = hub.presence(of: target) {
            body = stats ? presence.statsReply() : presence.reply(limit: limit)
        } else {
            body = Presence.emptyReply(target, stats: stats)
        }
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Cache-Control", "no-store")
        return Reply(HTTPResponse(status: .ok, headers: headers, body: body))
    }
}
