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

    init(connection: TCPConnection, gateway: Gateway) {
        self.connection = connection
        self.gateway = gateway
        lastWrite = connection.loop.nowMilliseconds
        heartbeatMilliseconds = UInt64(gateway.config.sseHeartbeatSeconds * 1000)
        maxQueuedBytes = gateway.config.maxQueuedBytes
        connection.highWaterBytes = gateway.config.maxQueuedBytes
    }

    /// Takes the connection over from HTTP and starts the stream. The target was checked already.
    func start(_ target: StreamTarget, since: UInt64?, date: String) {
        connection.delegate = self
        connection.write(Self.head(date: date))
        if case .success(let subscription) = gateway.hub.subscribe(self, to: target, since: since) {
            self.subscription = subscription
        } else {
            connection.closeAfterFlush()
        }
    }

    static func head(date: String) -> [UInt8] {
        Array(("HTTP/1.1 200 OK\r\nDate: \(date)\r\nContent-Type: text/event-stream\r\n"
            + "Cache-Control: no-store\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n").utf8)
    }

    // MARK: TCPConnectionDelegate

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {}

    func connectionDidReadEOF(_ connection: TCPConnection) {
        connection.close()
    }

    func connectionDidDrain(_ connection: TCPConnection) {
        subscription?.flushConflated()
    }

    func connectionDidClose(_ connection: TCPConnection) {
        if let subscription { gateway.hub.unsubscribe(subscription) }
        subscription = nil
        gateway.sessionDidClose(connection)
    }

    // MARK: PushSink

    var isOverLimit: Bool { connection.backlogBytes > maxQueuedBytes }

    func send(_ event: PushEvent) {
        connection.write(event.sseEvent)
        lastWrite = connection.loop.nowMilliseconds
    }

    func slowConsumer(_ subscription: Subscription) {
        // No close frame exists in SSE: the stream ends and the client resumes with Last-Event-ID.
        connection.close()
    }

    // MARK: GatewaySession

    func drain() {
        connection.closeAfterFlush()
    }

    func sweep(now: UInt64) {
        switch connection.state {
        case .open:
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
