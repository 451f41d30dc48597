import ReceptionistJSON
import ReceptionistWire

/// The bodies the gateway posts to the backend's hooks (`docs/HOOKS.md`). Pure.
enum HookRequests {
    static func connect(client: JSONValue, transport: String, _ request: ConnectRequest) -> JSONValue {
        var headers = JSONObject()
        for (name, value) in request.headers { headers[name] = .string(value) }
        return [
            "client": client, "transport": .string(transport), "remoteAddress": .string(request.remoteAddress),
            "headers": .object(headers),
        ]
    }

    static func subscribe(
        client: JSONValue, user: JSONValue, info: JSONValue, target: StreamTarget, options: SubscriptionOptions, presence: Bool
    ) -> JSONValue {
        var asked = JSONObject()
        if let models = options.models { asked["models"] = .array(models.map(JSONValue.string)) }
        if let paths = options.paths { asked["paths"] = .array(paths.map { .string($0.joined(separator: ".")) }) }
        if let rate = options.maxRate { asked["maxRate"] = .number(JSONNumber(rate)) }
        asked["presence"] = .bool(presence)
        var body: JSONObject = ["client": client, "user": user, "info": info]
        switch target {
        case .store(let name): body["store"] = .string(name)
        case .topic(let name): body["topic"] = .string(name)
        }
        body["options"] = .object(asked)
        return .object(body)
    }

    static func refresh(client: JSONValue, user: JSONValue, info: JSONValue, expiresAt: Double) -> JSONValue {
        ["client": client, "user": user, "info": info, "expiresAt": .number(JSONNumber(expiresAt))]
    }

    /// Who a grant names, for a hook's request: its `sub` and its `info`.
    static func identity(_ claims: TokenClaims?) -> (user: JSONValue, info: JSONValue) {
        let info = claims?.info.flatMap { try? JSONParser.parse($0) } ?? .null
        return (claims?.subject.map(JSONValue.string) ?? .null, info)
    }
}
