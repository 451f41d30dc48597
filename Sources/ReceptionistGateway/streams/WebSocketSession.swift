import ReceptionistLoop
import ReceptionistPush
import ReceptionistWire

/// One upgraded connection speaking `receptionist.v1` (or echoing, on `/ws/echo`).
///
/// Frames are decoded by the pure `WebSocketDecoder`; keepalive and closing deadlines come from
/// `WebSocketSessionState`; subscriptions, the outbound limit and the token's expiry are
/// `StreamSession`'s. After our close frame nothing else is sent (invariant 22): the peer's close
/// answer, or the close timeout, ends the connection.
///
/// Loop thread only.
final class WebSocketSession: StreamSession {
    enum Mode {
        case push
        case echo
    }

    // Every connection holds one of these: the one-byte fields come last, where they fill the
    // decoder's tail padding.
    let connection: TCPConnection
    var core: StreamCore
    private(set) var state: WebSocketSessionState
    /// Protocol messages this client may still send now (`--client-message-rate`).
    private var messageBucket: TokenBucket
    private var decoder: WebSocketDecoder
    private let mode: Mode
    /// The window bits of our compressed frames when permessage-deflate was agreed, else 0.
    private let deflateWindowBits: UInt8

    init(
        connection: TCPConnection, services: StreamServices, mode: Mode, claims: TokenClaims? = nil,
        deflate: PerMessageDeflate? = nil
    ) {
        self.connection = connection
        self.mode = mode
        let config = services.config
        core = StreamCore(services: services, claims: claims)
        messageBucket = config.clientMessageRate.bucket(now: connection.loop.nowMilliseconds)
        let compression = deflate == nil ? nil : services.compression
        deflateWindowBits = compression == nil ? 0 : UInt8(deflate!.compressionWindowBits)
        decoder = WebSocketDecoder(role: .server, maxMessageBytes: config.maxMessageBytes, inflater: compression?.inflater)
        if compression != nil { services.counters.compressionNegotiated += 1 }
        state = WebSocketSessionState(now: connection.loop.nowMilliseconds)
        connection.highWaterBytes = config.maxQueuedBytes
        connection.delaysWrites = mode == .push
    }


    /// Takes the connection over from HTTP; `remainder` is what the client sent after its upgrade
    /// request. With `connect`, nothing the client sends is read until the connect hook admits it.
    func start(remainder: [UInt8], connect: ConnectRequest? = nil) {
        connection.delegate = self
        guard let connect else { return startReading(remainder) }
        // The client's messages wait in the kernel until the connect hook has answered.
        connection.stopReading()
        admit(connect) { [weak self] in self?.startReading(remainder) }
    }

    func startReading(_ remainder: [UInt8]) {
        connection.startReading()
        if !remainder.isEmpty {
            remainder.withUnsafeBytes { received($0) }
        }
    }

    // MARK: Receiving

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        received(bytes)
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        state.heard(now: connection.loop.nowMilliseconds)
        let (messages, error) = decoder.decode(bytes)
        process(messages[...], error)
    }

    /// Work that answers later, then calls the continuation it is given (the subscribe hook).
    typealias Pause = (_ resume: @escaping () -> Void) -> Void

    /// Acts on `messages` in order. A message that waits for the backend holds back everything
    /// after it, read or not yet read, so that answers come in the order they were asked for.
    /// Once the connection is closing (a close decided, waiting for its answers), nothing more is
    /// acted on, nor read.
    private func process(_ messages: ArraySlice<WebSocketMessage>, _ error: WebSocketError?) {
        var rest = messages
        while let message = rest.popFirst() {
            if let pause = handle(message) {
                // A pause that ends before it returns (work refused at once) holds nothing back.
                var pausing = true, endedAtOnce = false
                pause { [weak self] in
                    if pausing { endedAtOnce = true; return }
                    guard let self, connection.state == .open, !isClosing else { return }
                    connection.startReading()
                    process(rest, error)
                }
                pausing = false
                if !endedAtOnce {
                    connection.stopReading()
                    return
                }
            }
            if connection.state != .open { return }
            if isClosing {
                // Nothing more is acted on; but once the close frame went, the peer's answer to
                // it in the same read is taken, so the handshake ends now, not at its time-out.
                if state.closeSent, let answer = rest.first(where: { if case .close = $0 { true } else { false } }) {
                    _ = handle(answer)
                }
                return
            }
        }
        if let error {
            services.logger.debug("websocket protocol error", metadata: ["code": "\(error.closeCode)", "reason": "\(error.reason)"])
            if error.closeCode == WebSocketCloseCode.messageTooBig { services.counters.refused(.messageTooBig) }
            // Failing the connection (RFC 6455 section 7.1.7): the close frame, then the socket;
            // after the answers to what was taken before the bad frame.
            let reason = Self.reason(for: error)
            closeWhenAnswered { [weak self] in
                self?.close(code: error.closeCode, reason: reason)
                self?.connection.closeAfterFlush()
            }
        }
    }

    private func handle(_ message: WebSocketMessage) -> Pause? {
        switch message {
        case .text(let text):
            services.counters.webSocketMessagesIn += 1
            if mode == .echo {
                writeFrame(echoFrame(.text, Array(text.utf8)))
            } else if !state.closeSent {
                let decoded = ClientMessage.decode(Array(text.utf8))
                // A publish this connection may make is counted by the publish rate
                // (`--publish-rate`), as over HTTP: a backend publishing on its WebSocket is not
                // held to what a browser may ask. One it may not make counts as any message.
                if case .success(.publish(let topic, _, _)) = decoded, publishRateKey(for: topic) != nil {
                    return perform(decoded)
                }
                guard services.config.clientMessageRate.take(&messageBucket, now: connection.loop.nowMilliseconds) else {
                    services.counters.refused(.messageRate)
                    refuseForMessageRate(decoded)
                    return nil
                }
                return perform(decoded)
            }
        case .binary(let bytes):
            services.counters.webSocketMessagesIn += 1
            if mode == .echo {
                writeFrame(echoFrame(.binary, bytes))
            } else {
                sendError(ClientMessage.Problem(.badMessage, "binary messages are not part of receptionist.v1; send JSON text"))
            }
        case .ping(let payload):
            writeFrame(WebSocketEncoder.frame(.pong, payload: payload))
        case .pong:
            break
        case .close(let code, _):
            // Echo the peer's status code, as RFC 6455 section 5.5.1 asks, once what it asked
            // before is answered.
            closeWhenAnswered { [weak self] in
                guard let self, connection.state == .open else { return }
                if state.sendingClose(now: connection.loop.nowMilliseconds) {
                    connection.write(code.map { WebSocketEncoder.close(code: $0, reason: "") } ?? WebSocketEncoder.frame(.close, payload: []))
                }
                connection.closeAfterFlush()
            }
        }
        return nil
    }

    private func perform(_ decoded: Result<ClientMessage, ClientMessage.Problem>) -> Pause? {
        switch decoded {
        case .failure(let problem):
            sendError(problem)
        case .success(.authenticate(let token)):
            authenticate(token)
        case .success(.authenticateKey(let key)):
            authenticate(apiKey: key)
        case .success(.publish(let topic, let data, let ref)):
            return publish(topic, data: data, ref: ref)
        case .success(.rpc(let id, let method, let data)):
            return rpc(id: id, method: method, data: data)
        case .success(.commit(let store, let request, let ref)):
            return commit(store, request: request, ref: ref)
        case .success(.ping(let ref)):
            writeFrame(WebSocketEncoder.frame(.text, payload: PushEncoder.pong(ref: ref)))
        case .success(.subscribe(let target, let since, let epoch, let options, let presence)):
            // A token that ran out lets nothing through, as for publishes; the stream ends.
            if expireTokenIfDue() { return nil }
            // A name no store or topic can have is refused as such: never a backend's to decide.
            if let problem = PushHub.invalidName(target) {
                sendError(problem)
                return nil
            }
            if needsSubscribeHook(target, presence: presence) {
                return subscribeThroughHook(target, since: since, epoch: epoch, options: options, presence: presence)
            }
            if let problem = subscribe(target, since: since, epoch: epoch, options: options, presence: presence) {
                sendError(problem)
            }
        case .success(.unsubscribe(let target)):
            if let problem = unsubscribe(target) {
                sendError(problem)
            } else {
                writeFrame(WebSocketEncoder.frame(.text, payload: PushEncoder.unsubscribed(target)))
            }
        }
        return nil
    }

    // MARK: Publishing

    /// Publishes as an HTTP client could: open without API keys, else after an `auth` with a key,
    /// or with a token whose `publish` claim covers the topic. The answer comes once the message
    /// is in the history; the session may be gone by then.
    /// What this connection's publishes to `topic` are counted against, or nil if it may not
    /// publish there.
    private func publishRateKey(for topic: String) -> String? {
        if !services.access.requiresAPIKey { return connection.peerAddress ?? "unknown" }
        if let key = core.publishRateKey { return key }
        // The publish hook decides for every client without an API key; on a gateway that
        // requires tokens, for one that has a grant (the subscribe hook is not asked without one).
        if publishHookDecides(topic), core.claims != nil || !services.access.requiresToken {
            return "client " + (core.claims?.subject ?? connection.peerAddress ?? "unknown")
        }
        guard let claims = core.claims, claims.allowsPublishing(to: topic) else { return nil }
        return "token " + (claims.subject ?? connection.peerAddress ?? "unknown")
    }

    /// A client's publish; a pause while the publish hook decides it.
    private func publish(_ topic: String, data: [UInt8], ref: String?) -> Pause? {
        // A token that ran out lets nothing through, publishes included; the stream ends.
        if expireTokenIfDue() { return nil }
        guard let rateKey = publishRateKey(for: topic) else {
            if core.claims != nil {
                services.counters.refused(.tokenScope)
                sendError(ClientMessage.Problem(.forbidden, "the token does not let this connection publish to '\(topic)'", ref: ref))
                return nil
            }
            services.counters.refused(.apiKey)
            sendError(ClientMessage.Problem(
                .unauthorized, "publishing needs an API key ({\"type\":\"auth\",\"apiKey\":…}) or a token with a publish claim", ref: ref))
            return nil
        }
        if case .limited(let seconds) = services.publisher.limiter.take(rateKey, now: connection.loop.nowMilliseconds) {
            services.counters.refused(.publishRate)
            sendError(ClientMessage.Problem(.rateLimited, "publish rate exceeded; retry after \(seconds) s", ref: ref))
            return nil
        }
        if core.publishRateKey == nil, !services.config.namespaces.allowsClientPublish(to: topic) {
            services.counters.refused(.tokenScope)
            sendError(ClientMessage.Problem(.forbidden, "clients may not publish to '\(topic)' (its namespace)", ref: ref))
            return nil
        }
        if core.publishRateKey == nil, publishHookDecides(topic) {
            return publishThroughHook(topic, data: data, ref: ref)
        }
        sequence(topic, data: data, ref: ref)
        return nil
    }

    /// Hands an allowed publish to the topic; the client is told its `seq` once it is in the history.
    func sequence(_ topic: String, data: [UInt8], ref: String?) {
        // In memory the answer is written before `publish` returns: nothing is owed meanwhile.
        let settle = services.publisher.log.answersAtOnce ? nil : owing()
        services.publisher.publish(topic, data: data) { [weak self] result in
            defer { settle?() }
            guard let self, self.connection.state == .open else { return }
            switch result {
            case .success(let seq):
                self.writeFrame(WebSocketEncoder.frame(.text, payload: PushEncoder.published(topic: topic, seq: seq, ref: ref)))
            case .failure(var problem):
                problem.ref = ref
                self.sendError(problem)
            }
        }
    }

    /// The close reason `docs/PROTOCOL.md` documents for each code.
    static func reason(for error: WebSocketError) -> String {
        switch error.closeCode {
        case WebSocketCloseCode.protocolError: "protocol error: \(error.reason)"
        case WebSocketCloseCode.invalidPayload: "invalid UTF-8"
        case WebSocketCloseCode.messageTooBig: "message too big"
        default: error.reason
        }
    }

    // MARK: Sending

    /// Queues a reply of our own (an error, `unsubscribed`, a pong…). Replies obey the limit too
    /// (invariant 28): a client that sends and never reads is closed, not buffered for. The reply
    /// goes first, and so do those to the requests taken before (invariant 64): the close takes
    /// no more requests, so what it waits for is bounded. A frame the connection's own close
    /// follows (`closing`) is not held to it: that close says why.
    func writeFrame(_ bytes: [UInt8], closing: Bool = false) {
        guard !state.closeSent else { return }
        services.counters.webSocketMessagesOut += 1
        connection.writeNow(bytes)
        if !closing, isOverOwedLimit { closeSlowConsumer() }
    }

    /// An echoed message, compressed as the client agreed (`/ws/echo` serves conformance suites).
    private func echoFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8]) -> [UInt8] {
        guard let compressor, payload.count >= services.compression!.minBytes else {
            return WebSocketEncoder.frame(opcode, payload: payload)
        }
        let deflated = compressor.compress(payload)
        // As for pushed frames: one compression would not shrink goes plain.
        guard deflated.count < payload.count else { return WebSocketEncoder.frame(opcode, payload: payload) }
        return WebSocketEncoder.header(opcode, length: deflated.count, compressed: true) + deflated
    }

    /// The compressor for this connection's frames, or nil for plain frames.
    private var compressor: ZlibStream? {
        deflateWindowBits == 0 ? nil : services.compression?.compressor(windowBits: Int(deflateWindowBits))
    }

    func sendError(_ problem: ClientMessage.Problem) {
        writeFrame(WebSocketEncoder.frame(.text, payload: PushEncoder.error(problem)))
    }

    /// Sends our close frame once; the peer's answer or the close timeout ends the connection.
    func close(code: UInt16, reason: String) {
        guard connection.state == .open, state.sendingClose(now: connection.loop.nowMilliseconds) else { return }
        connection.write(WebSocketEncoder.close(code: code, reason: reason))
    }

    // MARK: StreamSession

    /// Nothing goes out after our close frame, nor, once closing as a slow consumer, but answers.
    var isWritable: Bool { !state.closeSent && !services.owedAnswers.stopsPushes(connection) }

    func write(_ event: PushEvent) {
        services.counters.webSocketMessagesOut += event.messageCount
        if let compressor {
            // A short or incompressible message stays plain; a run may hold both kinds.
            let (frame, compressed) = event.compressedWebSocketFrame(
                compressedBy: compressor, minBytes: services.compression!.minBytes)
            services.counters.webSocketCompressedOut += compressed
            connection.write(frame)
        } else {
            connection.write(event.webSocketFrame)
        }
    }

    func end(_ reason: StreamEnd) {
        switch reason {
        case .slowConsumer:
            closeAfterAnswers(code: WebSocketCloseCode.policyViolation, reason: "slow consumer", stoppingPushes: true)
        case .tokenExpired:
            // The client is told why, then closed with 1008 (`docs/SECURITY.md`), once what it
            // asked before is answered.
            sendError(AccessControl.expiredProblem)
            closeAfterAnswers(code: WebSocketCloseCode.policyViolation, reason: "token expired")
        case .grantRefused(let reason):
            sendError(ClientMessage.Problem(.tokenExpired, reason))
            closeAfterAnswers(code: WebSocketCloseCode.policyViolation, reason: "expired")
        }
    }

    // MARK: GatewaySession

    var transport: SessionTransport { .webSocket }

    /// Tells the client when to come back (to any node), then closes with 1001.
    func drain() {
        guard connection.state == .open, !isClosing else { return }
        if mode == .push {
            // Told whatever its queue holds: the close that follows is 1001, never a slow
            // consumer's 1008 for the message that says the gateway is going.
            writeFrame(WebSocketEncoder.frame(
                .text, payload: PushEncoder.draining(reconnectAfterMilliseconds: services.reconnectJitterMilliseconds())), closing: true)
        }
        closeAfterAnswers(code: WebSocketCloseCode.goingAway, reason: "going away: draining")
    }

    func sweep(now: UInt64) {
        if !isClosing, expireTokenIfDue() { return }
        if !isClosing { refreshIfDue() }
        switch state.tick(now: now, services.webSocketTiming) {
        case .none: break
        case .ping: connection.write(WebSocketEncoder.frame(.ping, payload: []))
        case .abort:
            // A peer still reading what came before our close frame gets it (a slow link).
            if state.closeSent, services.closeWaits.peerStillReads(
                connection, unsent: connection.unsentBytes, now: now, timeout: services.webSocketTiming.closeTimeoutMilliseconds) { break }
            connection.close()
        }
    }
}
