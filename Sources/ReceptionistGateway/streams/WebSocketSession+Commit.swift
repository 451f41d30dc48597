import ReceptionistJSON
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// A client's commit over its WebSocket: the change set of `POST /api/stores/{store}/changes`,
/// with its conditions, allowed by an API key, by a `write` grant (a token's or the connect
/// hook's), or by the write hook (`docs/HOOKS.md`). It is answered `committed` once applied, or
/// with an error carrying its `ref`.
///
/// A commit holds back the messages after it until it has its place in its store's order (its
/// work returned on the job thread, after the write hook if one decides), so a connection's
/// commits are applied in the order they were sent, and answered in that order per store.
extension WebSocketSession {
    func commit(_ name: String, request: JSONValue, ref: String?) -> Pause? {
        if expireTokenIfDue() { return nil }
        let operations: [StoreOperation], condition: CommitCondition
        switch (ChangeRequest.operations(from: request), EntityTags.condition(of: request)) {
        case (.success(let parsed), .success(let conditions)): (operations, condition) = (parsed, conditions)
        case (.failure(let failure), _), (_, .failure(let failure)):
            sendError(ClientMessage.Problem(.badMessage, failure.detail, ref: ref))
            return nil
        }
        guard let rateKey = writeRateKey(for: name) else {
            // The write hook decides without a grant, but not for a connection with no identity
            // on a gateway that requires tokens.
            if services.hooks?.isSet(.write) == true, services.config.namespaces.calls(.write, for: name),
               core.claims != nil || !services.access.requiresToken
            {
                return writeThroughHook(name, request, operations, condition, ref: ref)
            }
            services.counters.refused(core.claims == nil ? .apiKey : .tokenScope)
            sendError(ClientMessage.Problem(
                core.claims == nil ? .unauthorized : .forbidden,
                "writing to store '\(name)' needs an API key or a \"write\" grant that covers it", ref: ref))
            return nil
        }
        return apply(name, operations, condition, rateKey: rateKey, ref: ref)
    }

    /// What this connection's writes to `store` are counted against, or nil if nothing it holds
    /// grants them.
    private func writeRateKey(for store: String) -> String? {
        // As over HTTP: without API keys, writes are open (and the gateway stays on loopback).
        if !services.access.requiresAPIKey { return connection.peerAddress ?? "unknown" }
        if let key = core.publishRateKey { return key }
        guard let claims = core.claims, claims.allowsWriting(to: store) else { return nil }
        return "token " + (claims.subject ?? connection.peerAddress ?? "unknown")
    }

    private func writeThroughHook(
        _ name: String, _ request: JSONValue, _ operations: [StoreOperation], _ condition: CommitCondition, ref: String?
    ) -> Pause? {
        guard let hooks = services.hooks else { return nil }
        let (user, _) = hookIdentity
        let body: JSONValue = ["client": clientName, "user": user, "store": .string(name), "changes": request["changes"] ?? .null]
        return { [unowned self] resume in
            // Owed from now, as for a publish through its hook.
            let settle = owing()
            hooks.call(.write, body) { [weak self] answer in
                defer { settle() }
                guard let self, connection.state == .open else { return }
                switch HookDecision.allow(answer, hook: .write) {
                case .allow:
                    let rateKey = "client " + (core.claims?.subject ?? connection.peerAddress ?? "unknown")
                    guard let pause = apply(name, operations, condition, rateKey: rateKey, ref: ref) else { return resume() }
                    pause(resume)
                case .deny(let reason):
                    services.counters.refused(.hookDenied)
                    sendError(ClientMessage.Problem(.forbidden, reason, ref: ref))
                    resume()
                case .unavailable(let why):
                    sendError(ClientMessage.Problem(.unavailable, why, ref: ref))
                    resume()
                }
            }
        }
    }

    /// Commits on a job thread, as the HTTP API does; the answer comes back on the loop. The
    /// pause ends once the commit has its place in the store's order.
    private func apply(_ name: String, _ operations: [StoreOperation], _ condition: CommitCondition, rateKey: String, ref: String?) -> Pause? {
        if case .limited(let seconds) = services.publisher.limiter.take(rateKey, now: connection.loop.nowMilliseconds) {
            services.counters.refused(.publishRate)
            sendError(ClientMessage.Problem(.rateLimited, "write rate exceeded; retry after \(seconds) s", ref: ref))
            return nil
        }
        guard let store = services.stores.store(name) else {
            sendError(StoreRegistry.isValidName(name)
                ? ClientMessage.Problem(.noSuchStore, "no store named '\(name)'", ref: ref)
                : ClientMessage.Problem(.badMessage, StoreError.invalidStoreName(name).description, ref: ref))
            return nil
        }
        return { [unowned self] resume in
            let hold = JobHold()
            let settle = owing()
            services.handoff.inOrder(hold).run({ reply in
                store.commit(operations, if: condition) { result in reply(result.map(\.version)) }
            }, answer: { [weak self] (result: Result<UInt64, StoreError>) in
                defer { settle() }
                guard let self, connection.state == .open else { return }
                switch result {
                case .success(let version): sendText(PushEncoder.committed(store: name, version: version, ref: ref))
                case .failure(let error): sendError(Self.problem(error, ref: ref))
                }
            }, whenFull: .failure(.unavailable("the job queue is full; retry later")))
            if !hold.whenEnded(resume) { resume() }
        }
    }

    /// The protocol's error for a commit the store refused.
    static func problem(_ error: StoreError, ref: String?) -> ClientMessage.Problem {
        switch error {
        case .preconditionFailed(let detail, let version):
            var problem = ClientMessage.Problem(.preconditionFailed, detail, ref: ref)
            problem.version = version
            return problem
        case .noSuchStore: return ClientMessage.Problem(.noSuchStore, error.description, ref: ref)
        case .unavailable, .outcomeUnknown, .overCapacity: return ClientMessage.Problem(.unavailable, error.description, ref: ref)
        case .storageFailed: return ClientMessage.Problem(.storageFailed, error.description, ref: ref)
        default: return ClientMessage.Problem(.badMessage, error.description, ref: ref)
        }
    }
}
