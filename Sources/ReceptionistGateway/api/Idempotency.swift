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
        guard let header = request.headers[.idempotencyKey] else { return .success(nil) }
        guard let key = IdempotencyKey(header: header) else {
            return .failure(ReplyError(.error(.badRequest, "Idempotency-Key must be 1 to 255 visible ASCII characters")))
        }
        return .success(key)
    }

    /// Runs `perform` unless `key` was used already. `scope` is the API key's (empty without keys).
    /// Any thread but the loop's: the Redis store waits for it.
    func run(_ key: IdempotencyKey?, scope: String, request: HTTPRequest, _ perform: () -> Reply) -> Reply {
        guard let key else { return perform() }
        let fingerprint = Self.fingerprint(request)
        switch store.claim(key, scope: scope, fingerprint: fingerprint) {
        case .claimed:
            let reply = perform()
            switch Self.settlement(of: reply) {
            case .complete(let stored): store.complete(key, scope: scope, fingerprint: fingerprint, reply: stored)
            case .release: store.release(key, scope: scope, fingerprint: fingerprint)
            case .keep: break
            }
            return reply
        case let other:
            return Self.answer(other)
        }
    }

    /// `run` on the loop, for work that answers later (Redis's reply): `perform` gets the door
    /// for its reply, and `done` gets the reply once the key is settled. No thread waits.
    func run(
        _ key: IdempotencyKey?, scope: String, request: HTTPRequest, later perform: @escaping (@escaping (Reply) -> Void) -> Void,
        done: @escaping (Reply) -> Void
    ) {
        guard let key else { return perform(done) }
        let fingerprint = Self.fingerprint(request)
        let store = self.store
        store.claim(key, scope: scope, fingerprint: fingerprint) { claim in
            guard case .claimed = claim else { return done(Self.answer(claim)) }
            perform { reply in
                // A retry is told the first answer only once the key holds it.
                switch Self.settlement(of: reply) {
                case .complete(let stored): store.complete(key, scope: scope, fingerprint: fingerprint, reply: stored) { done(reply) }
                case .release: store.release(key, scope: scope, fingerprint: fingerprint) { done(reply) }
                case .keep: done(reply)
                }
            }
        }
    }

    private static func fingerprint(_ request: HTTPRequest) -> [UInt8] {
        IdempotencyKey.fingerprint(method: request.method.name, target: request.target, body: request.body)
    }

    /// What a claimed key becomes once its request is answered.
    private enum Settlement {
        /// Answered with success: retries get this answer.
        case complete(StoredReply)
        /// Failed with nothing done: a retry may try again.
        case release
        /// The outcome is unknown: the key stays claimed, so a retry cannot write twice.
        case keep
    }

    private static func settlement(of reply: Reply) -> Settlement {
        let status = reply.response.status
        if (200..<300).contains(status.code) { return .complete(StoredReply(status: status, body: reply.response.body)) }
        return reply.outcomeKnown ? .release : .keep
    }

    /// The answer to a request whose key was not claimed.
    private static func answer(_ claim: IdempotencyClaim) -> Reply {
        switch claim {
        case .claimed:
            preconditionFailure("a claimed key is answered by its request")
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
