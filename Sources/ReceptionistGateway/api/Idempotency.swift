import ReceptionistWire

/// Runs a publish or a commit under the `Idempotency-Key` its request carries, so that a backend
/// may retry after a time-out without doubling anything: a retry of the same request within the
/// window gets the first attempt's answer (with `Idempotent-Replayed: true`) and publishes
/// nothing; the same key on another request is 409.
///
/// Only answers of 2xx are remembered: a request that failed (503 while Redis is down, say) may
/// be retried under the same key. A request whose outcome is unknown (Redis took it but its
/// answer was lost) keeps its key claimed: a retry gets 409 until the window passes, never a
/// second write.
struct Idempotency: Sendable {
    let store: any IdempotencyStore

    /// The request's key: nil without the header, a 400 for a malformed one.
    static func key(of request: HTTPRequest) -> Result<IdempotencyKey?, ReplyError> {
        guard let header = request.headers["Idempotency-Key"] else { return .success(nil) }
        guard let key = IdempotencyKey(header: header) else {
            return .failure(ReplyError(.error(.badRequest, "Idempotency-Key must be 1 to 255 visible ASCII characters")))
        }
        return .success(key)
    }

    /// Runs `perform` unless `key` was used already. `scope` is the API key's (empty without keys).
    func run(_ key: IdempotencyKey?, scope: String, request: HTTPRequest, _ perform: () -> Reply) -> Reply {
        guard let key else { return perform() }
        let fingerprint = IdempotencyKey.fingerprint(method: request.method.name, target: request.target, body: request.body)
        switch store.claim(key, scope: scope, fingerprint: fingerprint) {
        case .claimed:
            let reply = perform()
            let status = reply.response.status
            if (200..<300).contains(status.code) {
                store.complete(key, scope: scope, fingerprint: fingerprint, reply: StoredReply(status: status, body: reply.response.body))
            } else if reply.outcomeKnown {
                store.release(key, scope: scope, fingerprint: fingerprint)
            }
            return reply
        case .replay(let stored):
            var headers = HTTPHeaders()
            headers.add("Content-Type", "application/json")
            headers.add("Idempotent-Replayed", "true")
            return Reply(HTTPResponse(status: stored.status, headers: headers, body: stored.body))
        case .conflict:
            return .error(.conflict, "this Idempotency-Key was used for a different request")
        case .inProgress:
            return .error(.conflict, "a request with this Idempotency-Key is still being answered; retry it")
        case .unavailable(let reason):
            return .error(.serviceUnavailable, reason)
        }
    }
}
