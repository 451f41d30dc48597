import ReceptionistJSON
import ReceptionistPush
import ReceptionistWire

/// What a WebSocket session asks the backend's hooks: to admit it, to let a publish through
/// (or rewrite it), and to answer an RPC (`docs/HOOKS.md`).
extension WebSocketSession {
    /// Sends one protocol message of our own (a reply), as a text frame.
    func sendText(_ message: [UInt8]) {
        writeFrame(WebSocketEncoder.frame(.text, payload: message))
    }

    /// Admits the connection by the connect hook's answer, then calls `admitted`. A refusal
    /// closes with 1008 and the hook's reason; no answer closes with 1013 after an `unavailable`
    /// error. Either way the client's close answer is read, so the close handshake completes.
    func admit(_ request: ConnectRequest, then admitted: @escaping () -> Void) {
        askConnectHook(request) { [weak self] decision in
            guard let self else { return }
            switch decision {
            case .admit(let claims):
                core.claims = claims
                core.grantFromHook = true
                admitted()
            case .refuse(_, let reason):
                connection.startReading()
                close(code: WebSocketCloseCode.policyViolation, reason: reason)
            case .unavailable(let why):
                connection.startReading()
                sendError(ClientMessage.Problem(.unavailable, why))
                close(code: WebSocketCloseCode.tryAgainLater, reason: "try again later")
            }
        }
    }

    /// Asks the subscribe hook about a subscription the grant does not cover, then subscribes as
    /// far as it allows. The connection's later messages wait for the answer.
    func subscribeThroughHook(
        _ target: StreamTarget, since: UInt64?, epoch: String?, options: SubscriptionOptions, presence: Bool
    ) -> Pause {
        { [unowned self] resume in
            // Owed from now: a close (a drain, an expired token) waits for the answer.
            let settle = owing()
            askSubscribeHook(target, options: options, presence: presence) { [weak self] result in
                defer { settle() }
                guard let self else { return }
                if isClosing {
                    // Closing meanwhile: no stream starts, but the subscribe is answered.
                    return sendError(ClientMessage.Problem(.unavailable, "the connection is closing"))
                }
                switch result {
                case .success(let narrowed):
                    if let problem = subscribe(target, since: since, epoch: epoch, options: narrowed, presence: presence, granted: true) {
                        sendError(problem)
                    }
                case .failure(let problem):
                    sendError(problem)
                }
                resume()
            }
        }
    }

    /// Whether the publish hook rules on a client's publishes to `topic`.
    func publishHookDecides(_ topic: String) -> Bool {
        services.hooks?.isSet(.publish) == true && services.config.namespaces.calls(.publish, for: topic)
    }

    /// Asks the publish hook, then publishes what it allows: the data as sent, or its replacement.
    /// The connection's later messages wait for the answer, so its publishes are numbered in the
    /// order it sent them, whichever answer comes first.
    func publishThroughHook(_ topic: String, data: [UInt8], ref: String?) -> Pause? {
        guard let hooks = services.hooks else { return nil }
        let (user, _) = hookIdentity
        let members: JSONObject = ["client": clientName, "user": user, "topic": .string(topic)]
        return { [unowned self] resume in
            // Owed from now: a close waits for the hook and the publish it allows (which owes its
            // own answer before this is settled).
            let settle = owing()
            hooks.call(.publish, members, data: data) { [weak self] answer in
                defer { settle() }
                guard let self, connection.state == .open else { return }
                switch HookDecision.allow(answer, hook: .publish) {
                case .allow(let answer):
                    sequence(topic, data: answer["data"].map { JSONWriter.encode($0) } ?? data, ref: ref)
                case .deny(let reason):
                    services.counters.refused(.hookDenied)
                    sendError(ClientMessage.Problem(.forbidden, reason, ref: ref))
                case .unavailable(let why):
                    sendError(ClientMessage.Problem(.unavailable, why, ref: ref))
                }
                resume()
            }
        }
    }

    /// Calls the RPC hook; its answer comes back as `rpc_result`, any failure as `rpc_error`. With
    /// 16 of the connection's RPCs under way already (`RPCWindows`), this one and every message
    /// after it wait until one of them is answered.
    func rpc(id: String, method: String, data: JSONValue) -> Pause? {
        if expireTokenIfDue() { return nil }
        guard let hooks = services.hooks, hooks.isSet(.rpc) else {
            sendText(PushEncoder.rpcError(id: id, code: "rpc_failed", message: "this gateway has no RPC hook (--hook-rpc)"))
            return nil
        }
        if services.access.requiresToken, core.claims == nil {
            sendText(PushEncoder.rpcError(
                id: id, code: "unauthorized", message: "an RPC needs a token: send {\"type\":\"auth\",\"token\":…} first"))
            return nil
        }
        let (user, info) = hookIdentity
        let body: JSONValue = ["client": clientName, "user": user, "info": info, "method": .string(method), "data": data]
        let windows = services.rpcWindows
        guard windows.hasRoom(connection) else {
            return { [unowned self] resume in
                // Owed from now: a close waits for its answer, as for the RPCs under way.
                let settle = owing()
                windows.whenRoom(connection) { [weak self] in
                    defer { settle() }
                    guard let self, connection.state == .open else { return }
                    guard !isClosing else {
                        return sendText(PushEncoder.rpcError(id: id, code: "unavailable", message: "the connection is closing"))
                    }
                    callRPC(hooks, id: id, body: body)
                    resume()
                }
            }
        }
        callRPC(hooks, id: id, body: body)
        return nil
    }

    private func callRPC(_ hooks: HookClient, id: String, body: JSONValue) {
        let settle = owing()
        let ended = services.rpcWindows.started(connection)
        hooks.call(.rpc, body) { [weak self] answer in
            defer {
                settle()
                ended()
            }
            guard let self, connection.state == .open else { return }
            switch HookDecision.rpc(answer) {
            case .result(let value): sendText(PushEncoder.rpcResult(id: id, data: value))
            case .error(let code, let message): sendText(PushEncoder.rpcError(id: id, code: code, message: message))
            }
        }
    }
}
