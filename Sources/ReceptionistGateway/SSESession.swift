import ReceptionistLoop
import ReceptionistWire

/// One `text/event-stream` response: a single subscription streamed until either side ends it.
///
/// The response has no length and says `Connection: close`, so the stream is delimited by the
/// connection itself; nothing the client sends after its request is read.
///
/// Loop thread only.
final class SSESession: TCPConnectionDelegate, GatewaySession, PushSink {
    let connection: TCPConnection
    private unowned let gateway: Gateway
    private var subscription: Subscription?
    private var lastWrite: UInt64
    private let heartbeatMilliseconds: UInt64
    private let maxQueuedBytes: Int
    /// When the subscription token runs out (seconds since the Unix epoch); the stream ends then.
    private let expiresAt: Double?

    init(connection: TCPConnection, gateway: Gateway, expiresAt: Double?) {
        self.expiresAt = expiresAt
        self.connection = connection
        self.gateway = gateway
        lastWrite = connection.loop.nowMilliseconds
        heartbeatMilliseconds = UInt64(gateway.config.sseHeartbeatSeconds * 1000)
        maxQueuedBytes = gateway.config.maxQueuedBytes
        connection.highWaterBytes = gateway.config.maxQueuedBytes
    }

    /// Takes the connection over from HTTP and starts the stream. The target was checked already.
    func start(_ target: StreamTarget, since: UInt64?, epoch: String?, date: String, corsOrigin: String?) {
        connection.delegate = self
        connection.write(Self.head(date: date, corsOrigin: corsOrigin))
        if case .success(let subscription) = gateway.hub.subscribe(self, to: target, since: since, epoch: epoch) {
            self.subscription = subscription
        } else {
            connection.closeAfterFlush()
        }
    }

    /// `corsOrigin` was checked against the allow-list already; it contains no CR or LF, since
    /// the request parser refuses those in header values.
    static func head(date: String, corsOrigin: String? = nil) -> [UInt8] {
        let cors = corsOrigin.map { "Access-Control-Allow-Origin: \($0)\r\nVary: Origin\r\n" } ?? ""
        return Array(("HTTP/1.1 200 OK\r\nDate: \(date)\r\nContent-Type: text/event-stream\r\n"
            + "Cache-Control: no-store\r\nX-Accel-Buffering: no\r\n\(cors)Connection: close\r\n\r\n").utf8)
    }

    // MARK: TCPConnectionDelegate

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {}

    func connectionDidReadEOF(_ connection: TCPConnection) {
        connection.close()
    }

    func connectionDidDrain(_ connection: TCPConnection) {
        gateway.counters.conflatedChangeSets += subscription?.flushConflated() ?? 0
    }

    func connectionDidClose(_ connection: TCPConnection) {
        if let subscription { gateway.hub.unsubscribe(subscription) }
        subscription = nil
        gateway.sessionDidClose(connection)
    }

    // MARK: PushSink

    var isOverLimit: Bool { connection.backlogBytes > maxQueuedBytes }

    func send(_ event: PushEvent) {
        gateway.counters.sseMessagesOut += 1
        connection.write(event.sseEvent)
        lastWrite = connection.loop.nowMilliseconds
    }

    func slowConsumer(_ subscription: Subscription) {
        // No close frame exists in SSE: the stream ends and the client resumes with Last-Event-ID.
        connection.close()
    }

    // MARK: GatewaySession

    var transport: SessionTransport { .sse }

    /// Ends the stream with a `draining` event whose `retry:` spreads the reconnections
    /// (`EventSource` honours it), then closes once everything queued is written.
    func drain() {
        guard connection.state == .open else { return }
        let delay = Gateway.reconnectJitterMilliseconds()
        connection.write(SSEEncoder.retry(milliseconds: delay))
        connection.write(SSEEncoder.event("draining", id: nil, data: PushEncoder.draining(reconnectAfterMilliseconds: delay)))
        connection.closeAfterFlush()
    }

    func sweep(now: UInt64) {
        switch connection.state {
        case .open:
            if let expiresAt, AccessControl.nowSeconds() >= expiresAt {
                gateway.counters.refused(.tokenExpired)
                connection.write(SSEEncoder.event("error", id: nil, data: PushEncoder.error(AccessControl.expiredProblem)))
                connection.closeAfterFlush()
                return
            }
            if now &- lastWrite >= heartbeatMilliseconds {
                connection.write(SSEEncoder.heartbeat)
                lastWrite = now
            }
        case .lingering:
            if let since = connection.lingeringSince, now &- since >= UInt64(gateway.config.lingerSeconds * 1000) {
                connection.close()
            }
        case .closing, .closed:
            break
        }
    }
}
