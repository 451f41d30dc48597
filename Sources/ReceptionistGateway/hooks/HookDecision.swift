import ReceptionistJSON
import ReceptionistWire

/// What the backend's answer to a hook decides, read from `HookAnswer` by the rules of
/// `docs/HOOKS.md`. Pure: the sessions act on it.
enum HookDecision {
    /// The connect hook's answer: the identity and grants to admit the connection with (the same
    /// grants a token carries), a refusal (401 or 403, with the reason), or no answer.
    enum Connect: Equatable {
        case admit(TokenClaims)
        case refuse(status: Int, reason: String)
        case unavailable(String)
    }

    /// A publish, write or subscribe hook's answer: allowed (with the replacement data or the
    /// answer's other members), refused with a reason, or no answer.
    enum Allow: Equatable {
        case allow(JSONValue)
        case deny(String)
        case unavailable(String)
    }

    /// An RPC hook's answer: the result's JSON, or the error to give the client.
    enum RPC: Equatable {
        case result(JSONValue)
        case error(code: String, message: String)
    }

    static func connect(_ answer: HookAnswer, nowSeconds: Double) -> Connect {
        switch answer {
        case .unavailable(let why):
            return .unavailable(why)
        case .answered(let status, let body) where status == 401 || status == 403:
            return .refuse(status: status, reason: body?["reason"]?.stringValue ?? "refused by the connect hook")
        case .answered(200, let body?):
            // The other hooks' way of refusing is a refusal here too, never an admission: a
            // backend answering every hook alike must not let in whom it meant to refuse.
            switch body["allow"] {
            case nil, .bool(true)?: break
            case .bool(false)?: return .refuse(status: 403, reason: body["reason"]?.stringValue ?? "refused by the connect hook")
            case _?: return .unavailable("the connect hook's \"allow\" must be true or false")
            }
            guard body.objectValue != nil, let user = body["user"]?.stringValue else {
                return .unavailable("the connect hook's answer needs a string \"user\"")
            }
            var claims = TokenClaims(subject: user, expiresAt: .infinity)
            if let expires = body["expiresAt"], expires != .null {
                guard let seconds = expires.numberValue, seconds.isFinite else {
                    return .unavailable("the connect hook's \"expiresAt\" must be seconds since 1970")
                }
                guard seconds > nowSeconds else { return .refuse(status: 401, reason: "the connect hook's grant has expired") }
                claims.expiresAt = seconds
            }
            do throws(Malformed) {
                claims.stores = try names(body, "stores")
                claims.topics = try names(body, "topics")
                claims.publish = try names(body, "publish")
                claims.write = try names(body, "write")
                claims.presence = try names(body, "presence")
            } catch {
                return .unavailable("the connect hook's \"\(error.member)\" must be an array of name patterns")
            }
            if let info = body["info"], info != .null {
                let text = JSONWriter.encode(info)
                guard info.objectValue != nil, text.count <= TokenClaims.maxInfoBytes else {
                    return .unavailable("the connect hook's \"info\" must be an object of at most \(TokenClaims.maxInfoBytes) bytes")
                }
                claims.info = text
            }
            return .admit(claims)
        case .answered(let status, _):
            return .unavailable("the connect hook answered \(status)")
        }
    }

    /// A publish, write or subscribe hook: `{"allow":true,…}` allows, `{"allow":false,"reason"}`,
    /// 401 or 403 refuses; anything else is no answer.
    static func allow(_ answer: HookAnswer, hook: HookKind) -> Allow {
        switch answer {
        case .unavailable(let why):
            return .unavailable(why)
        case .answered(let status, let body) where status == 401 || status == 403:
            return .deny(body?["reason"]?.stringValue ?? "refused by the \(hook.rawValue) hook")
        case .answered(200, let body?) where body["allow"] == .bool(true):
            return .allow(body)
        case .answered(200, let body?) where body["allow"] == .bool(false):
            return .deny(body["reason"]?.stringValue ?? "refused by the \(hook.rawValue) hook")
        case .answered(let status, _):
            return .unavailable("the \(hook.rawValue) hook answered \(status) without {\"allow\": true|false}")
        }
    }

    /// The subscribe hook's answer: the options asked for, narrowed to its `models` and `paths`,
    /// or why the subscription is refused (`forbidden`, or `unavailable` without an answer).
    /// A topic's subscription has no models or paths: the hook allows it or not.
    static func subscribe(
        _ answer: HookAnswer, asked: SubscriptionOptions, store: Bool = true
    ) -> Result<SubscriptionOptions, ClientMessage.Problem> {
        switch allow(answer, hook: .subscribe) {
        case .unavailable(let why):
            return .failure(ClientMessage.Problem(.unavailable, why))
        case .deny(let reason):
            return .failure(ClientMessage.Problem(.forbidden, reason))
        case .allow where !store:
            return .success(asked)
        case .allow(let body):
            // `"models": []` or `null` allows no model, never every one (a serializer's way of
            // writing "none" must not grant the whole store); likewise `paths`.
            for field in ["models", "paths"] {
                switch body[field] {
                case .null?, .array([])?:
                    return .failure(ClientMessage.Problem(.forbidden, "the subscribe hook allows no \(field)"))
                default: break
                }
            }
            var limits = JSONObject()
            limits["models"] = body["models"]
            limits["paths"] = body["paths"]
            guard case .success(let allowed) = SubscriptionOptions.decode(message: .object(limits)) else {
                return .failure(ClientMessage.Problem(.unavailable, "the subscribe hook's \"models\" and \"paths\" must be lists as a subscribe's are"))
            }
            guard let narrowed = asked.narrowed(to: allowed) else {
                return .failure(ClientMessage.Problem(.forbidden, "the subscribe hook allows none of the models or paths asked for"))
            }
            return .success(narrowed)
        }
    }

    /// The refresh hook's answer: the grant's new end (infinite for `"expiresAt": null`), a
    /// refusal with its reason, or no answer.
    enum Refresh: Equatable {
        case extend(until: Double)
        case refuse(String)
        case unavailable(String)
    }

    static func refresh(_ answer: HookAnswer, nowSeconds: Double) -> Refresh {
        switch answer {
        case .unavailable(let why):
            return .unavailable(why)
        case .answered(let status, let body) where status == 401 || status == 403:
            return .refuse(body?["reason"]?.stringValue ?? "the refresh hook did not extend the connection")
        case .answered(200, let body?) where body.objectValue != nil:
            switch body["expiresAt"] {
            case .null?: return .extend(until: .infinity)
            case .number(let seconds)? where seconds.doubleValue.isFinite:
                guard seconds.doubleValue > nowSeconds else { return .refuse("the refresh hook's grant has expired") }
                return .extend(until: seconds.doubleValue)
            default: return .unavailable("the refresh hook's answer needs \"expiresAt\": seconds since 1970, or null")
            }
        case .answered(let status, _):
            return .unavailable("the refresh hook answered \(status)")
        }
    }

    static func rpc(_ answer: HookAnswer) -> RPC {
        switch answer {
        case .unavailable(let why):
            return .error(code: "unavailable", message: why)
        case .answered(200, let body):
            return .result(body ?? .null)
        case .answered(let status, let body) where status == 401 || status == 403:
            return .error(code: "forbidden", message: body?["reason"]?.stringValue ?? "refused by the rpc hook")
        case .answered(let status, let body):
            return .error(code: "rpc_failed", message: body?["reason"]?.stringValue ?? "the rpc hook answered \(status)")
        }
    }

    private struct Malformed: Error { let member: String }

    private static func names(_ body: JSONValue, _ member: String) throws(Malformed) -> [String] {
        guard let value = body[member], value != .null else { return [] }
        guard case .array(let items) = value else { throw Malformed(member: member) }
        var names: [String] = []
        for item in items {
            guard let name = item.stringValue else { throw Malformed(member: member) }
            names.append(name)
        }
        return names
    }
}
