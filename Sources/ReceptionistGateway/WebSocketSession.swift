import Logging
import ReceptionistLoop
import ReceptionistWire

/// One upgraded connection speaking `receptionist.v1` (or echoing, on `/ws/echo`).
///
/// Frames are decoded by the pure `WebSocketDecoder`; deadlines come from `WebSocketSessionState`.
/// After our close frame nothing else is sent: the peer's close answer, or the close timeout,
/// ends the connection.
///
/// Loop thread only.
final class WebSocketSession: TCPConnectionDelegate, GatewaySession, PushSink {
    enum Mode {
        case push
        case echo
    }

    let connection: TCPConnection
    private unowned let gateway: Gateway
    private let mode: Mode
    private var decoder: WebSocketDecoder
    private var state: WebSocketSessionState
    /// A connection holds a handful of subscriptions: a plain array, searched linearly, costs an
    /// idle connection far less memory than a dictionary would.
    private var subscriptions: [Subscription] = []
    private let maxQueuedBytes: Int
    /// The subscription token's claims, from `?token=` or an `auth` message; checked on every
    /// subscribe when the gateway requires tokens, and the connection is closed when they expire.
    /// Boxed: most connections hold none, and an idle connection then pays one pointer for it.
    private var grant: Grant?
    private var claims: TokenClaims? { grant?.claims }

    private final class Grant {
        let claims: TokenClaims
        init(_ claims: TokenClaims) { self.claims = claims }
    }
    /// Protocol messages this client may still send now (`--client-message-rate`).
    private var messageBucket: TokenBucket

    init(connection: TCPConnection, gateway: Gateway, mode: Mode, claims: TokenClaims? = nil) {
        self.connection = connection
        grant = claims.map(Grant.init)
        messageBucket = gateway.config.clientMessageRate.bucket(now: connection.loop.nowMilliseconds)
        self.gateway = gateway
        self.mode = mode
        let config = gateway.config
        decoder = WebSocketDecoder(role: .server, maxMessageBytes: config.maxMessageBytes)
        state = WebSocketSessionState(
            now: connection.loop.nowMilliseconds,
            pingIntervalMilliseconds: UInt64(config.pingIntervalSeconds * 1000),
            pingTimeoutMilliseconds: UInt64(config.pingTimeoutSeconds * 1000),
            closeTimeoutMilliseconds: UInt64(config.lingerSeconds * 1000))
        maxQueuedBytes = config.maxQueuedBytes
        connection.highWaterBytes = config.maxQueuedBytes
    }

    /// Takes the connection over from HTTP; `remainder` is what the client sent after its upgrade request.
    func start(remainder: [UInt8]) {
        connection.delegate = self
        connection.startReading()
        if !remainder.isEmpty {
            remainder.withUnsafeBytes { received($0) }
        }
    }

    // MARK: TCPConnectionDelegate

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        received(bytes)
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        // A peer that half-closes without a close frame gets nothing more.
        connection.close()
    }

    func connectionDidDrain(_ connection: TCPConnection) {
        for subscription in subscriptions {
            gateway.counters.conflatedChangeSets += subscription.flushConflated()
        }
    }

    func connectionDidClose(_ connection: TCPConnection) {
        for subscription in subscriptions {
            gateway.hub.unsubscribe(subscription)
        }
        subscriptions.removeAll()
        gateway.sessionDidClose(connection)
    }

    // MARK: Receiving

    private func received(_ bytes: UnsafeRawBufferPointer) {
        state.heard(now: connection.loop.nowMilliseconds)
        let (messages, error) = decoder.decode(bytes)
        for message in messages {
            handle(message)
            if connection.state != .open { return }
        }
        if let error {
            gateway.logger.debug("websocket protocol error", metadata: ["code": "\(error.closeCode)", "reason": "\(error.reason)"])
            if error.closeCode == WebSocketCloseCode.messageTooBig { gateway.counters.refused(.messageTooBig) }
            // Failing the connection (RFC 6455 section 7.1.7): the close frame, then the socket.
            close(code: error.closeCode, reason: Self.reason(for: error))
            connection.closeAfterFlush()
        }
    }

    private func handle(_ message: WebSocketMessage) {
        switch message {
        case .text, .binary:
            gateway.counters.webSocketMessagesIn += 1
        default:
            break
        }
        switch message {
        case .text(let text):
            if mode == .echo {
                write(WebSocketEncoder.text(text))
            } else if !state.closeSent {
                guard gateway.config.clientMessageRate.take(&messageBucket, now: connection.loop.nowMilliseconds) else {
                    gateway.counters.refused(.messageRate)
                    return sendError(ClientMessage.Problem("rate_limited", "too many messages; this one was dropped"))
                }
                perform(ClientMessage.decode(Array(text.utf8)))
            }
        case .binary(let bytes):
            if mode == .echo {
                write(WebSocketEncoder.frame(.binary, payload: bytes))
            } else {
                sendError(ClientMessage.Problem("bad_message", "binary messages are not part of receptionist.v1; send JSON text"))
            }
        case .ping(let payload):
            write(WebSocketEncoder.frame(.pong, payload: payload))
        case .pong:
            break
        case .close(let code, _):
            if state.sendingClose(now: connection.loop.nowMilliseconds) {
                // Echo the peer's status code, as RFC 6455 section 5.5.1 asks.
                if let code {
                    connection.write(WebSocketEncoder.close(code: code, reason: ""))
                } else {
                    connection.write(WebSocketEncoder.frame(.close, payload: []))
                }
            }
            connection.closeAfterFlush()
        }
    }

    private func perform(_ decoded: Result<ClientMessage, ClientMessage.Problem>) {
        switch decoded {
        case .failure(let problem):
            sendError(problem)
        case .success(.authenticate(let token)):
            authenticate(token)
        case .success(.subscribe(let target, let since, let epoch)):
            guard !subscriptions.contains(where: { $0.target == target }) else {
                return sendError(ClientMessage.Problem("already_subscribed", "this connection already subscribes to \(target)"))
            }
            if let problem = permission(for: target) {
                return sendError(problem)
            }
            guard subscriptions.count < gateway.config.maxSubscriptionsPerConnection else {
                gateway.counters.refused(.subscriptionLimit)
                return sendError(ClientMessage.Problem(
                    "too_many_subscriptions",
                    "a connection may hold at most \(gateway.config.maxSubscriptionsPerConnection) subscriptions"))
            }
            switch gateway.hub.subscribe(self, to: target, since: since, epoch: epoch) {
            case .success(let subscription): subscriptions.append(subscription)
            case .failure(let problem): sendError(problem)
            }
        case .success(.unsubscribe(let target)):
            guard let index = subscriptions.firstIndex(where: { $0.target == target }) else {
                return sendError(ClientMessage.Problem("not_subscribed", "this connection does not subscribe to \(target)"))
            }
            gateway.hub.unsubscribe(subscriptions.remove(at: index))
            write(WebSocketEncoder.frame(.text, payload: PushEncoder.unsubscribed(target)))
        }
    }

    private func authenticate(_ token: String) {
        switch gateway.access.checkToken(token) {
        case .success(let verified):
            grant = Grant(verified)
            write(WebSocketEncoder.frame(.text, payload: PushEncoder.authenticated(expiresAt: verified.expiresAt)))
        case .failure(.expired):
            expire()
        case .failure(let failure):
            gateway.counters.refused(.tokenInvalid)
            sendError(ClientMessage.Problem(failure.code, failure.description))
        }
    }

    /// Why this connection may not subscribe to `target`, or nil if it may.
    private func permission(for target: StreamTarget) -> ClientMessage.Problem? {
        guard gateway.access.requiresToken else { return nil }
        guard let claims else {
            gateway.counters.refused(.tokenMissing)
            return ClientMessage.Problem("unauthorized", "subscriptions need a token: send {\"type\":\"auth\",\"token\":…} first")
        }
        guard claims.allows(target) else {
            gateway.counters.refused(.tokenScope)
            return ClientMessage.Problem("forbidden", "the token does not cover \(target)")
        }
        return nil
    }

    /// The token ran out: the client is told why, then closed with 1008 (`docs/SECURITY.md`).
    private func expire() {
        gateway.counters.refused(.tokenExpired)
        sendError(AccessControl.expiredProblem)
        close(code: WebSocketCloseCode.policyViolation, reason: "token expired")
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

    private func write(_ bytes: [UInt8]) {
        guard !state.closeSent else { return }
        gateway.counters.webSocketMessagesOut += 1
        connection.write(bytes)
    }

    private func sendError(_ problem: ClientMessage.Problem) {
        write(WebSocketEncoder.frame(.text, payload: PushEncoder.error(problem)))
    }

    /// Sends our close frame once; the peer's answer or the close timeout ends the connection.
    func close(code: UInt16, reason: String) {
        guard connection.state == .open, state.sendingClose(now: connection.loop.nowMilliseconds) else { return }
        connection.write(WebSocketEncoder.close(code: code, reason: reason))
    }

    // MARK: PushSink

    var isOverLimit: Bool { connection.backlogBytes > maxQueuedBytes }

    func send(_ event: PushEvent) {
        guard !state.closeSent else { return }
        gateway.counters.webSocketMessagesOut += 1
        connection.write(event.webSocketFrame)
    }

    func slowConsumer(_ subscription: Subscription) {
        gateway.logger.debug("slow consumer closed", metadata: ["target": "\(subscription.target)", "queued": "\(connection.queuedBytes)"])
        gateway.counters.refused(.slowConsumer)
        close(code: WebSocketCloseCode.policyViolation, reason: "slow consumer")
    }

    // MARK: GatewaySession

    var transport: SessionTransport { .webSocket }

    /// Tells the client when to come back (to any node), then closes with 1001.
    func drain() {
        guard connection.state == .open, !state.closeSent else { return }
        if mode == .push {
            write(WebSocketEncoder.frame(
                .text, payload: PushEncoder.draining(reconnectAfterMilliseconds: Gateway.reconnectJitterMilliseconds())))
        }
        close(code: WebSocketCloseCode.goingAway, reason: "going away: draining")
    }

    func sweep(now: UInt64) {
        guard connection.state == .open else {
            if connection.state == .lingering, let since = connection.lingeringSince,
               now &- since >= UInt64(gateway.config.lingerSeconds * 1000) {
                connection.close()
            }
            return
        }
        if let claims, AccessControl.nowSeconds() >= claims.expiresAt, !state.closeSent {
            return expire()
        }
        switch state.tick(now: now) {
        case .none: break
        case .ping: connection.write(WebSocketEncoder.frame(.ping, payload: []))
        case .abort: connection.close()
        }
    }
}
