import Logging
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush

/// What every WebSocket and SSE session is handed when it starts: the push hub, the trust checks,
/// the counters and the table it reports to. Sessions see these and nothing else of the gateway,
/// so each can be built and tested alone.
///
/// Loop thread only.
final class StreamServices {
    let config: GatewayConfig
    let hub: PushHub
    /// Where a WebSocket client's publishes go, as HTTP ones do.
    let publisher: TopicPublisher
    let access: AccessControl
    let counters: GatewayCounters
    let logger: Logger
    unowned let table: any SessionTable
    /// permessage-deflate's shared streams, or nil with `--no-compression`.
    let compression: FrameCompression?
    /// Every WebSocket connection's keepalive and close timeouts.
    let webSocketTiming: WebSocketSessionState.Timing
    /// The backend's hooks; nil when none is set.
    let hooks: HookClient?
    /// Where a client's commits go: the stores, on a job thread.
    let stores: StoreRegistry
    let handoff: JobHandoff
    /// What each WebSocket connection's client is still owed (its close waits for it).
    let owedAnswers = OwedAnswers()
    /// The RPCs each WebSocket connection has under way: 16 at most, the next waits.
    let rpcWindows = RPCWindows(limit: 16)
    /// WebSocket connections whose close waits for a peer still reading what came before it.
    let closeWaits = CloseWaits()

    init(
        config: GatewayConfig, hub: PushHub, publisher: TopicPublisher, access: AccessControl, counters: GatewayCounters,
        logger: Logger, table: any SessionTable, hooks: HookClient?, stores: StoreRegistry, handoff: JobHandoff
    ) {
        self.hooks = hooks
        self.stores = stores
        self.handoff = handoff
        self.config = config
        self.hub = hub
        self.publisher = publisher
        self.access = access
        self.counters = counters
        self.logger = logger
        self.table = table
        compression = config.compression ? FrameCompression(minBytes: config.compressionMinBytes) : nil
        webSocketTiming = WebSocketSessionState.Timing(
            pingIntervalMilliseconds: UInt64(config.pingIntervalSeconds * 1000),
            pingTimeoutMilliseconds: UInt64(config.pingTimeoutSeconds * 1000),
            closeTimeoutMilliseconds: UInt64(config.lingerSeconds * 1000))
    }

    /// The services of the gateway that runs `loop`.
    ///
    /// Unchecked: every session reaches its services through here. Safe because the gateway sets
    /// the loop's context to its services before it listens, and never changes it, and one
    /// gateway runs per loop.
    static func of(_ loop: EventLoop) -> StreamServices {
        unsafeDowncast(loop.context.unsafelyUnwrapped, to: StreamServices.self)
    }

    /// The next connection's presence id. A Weyl sequence from a random start: an odd step visits
    /// every 64-bit value once before any repeats, so no two connections of this gateway share an
    /// id, and ids from different nodes are unlikely to meet.
    func nextClientID() -> UInt64 {
        lastClientID &+= Self.clientIDStep
        return lastClientID
    }

    private var lastClientID = UInt64.random(in: .min ... .max)
    private static let clientIDStep: UInt64 = 0x9E37_79B9_7F4A_7C15

    /// A random delay of up to one second that a client told to go waits before it reconnects,
    /// so that a drained node's clients do not all arrive at the other nodes at once.
    func reconnectJitterMilliseconds() -> UInt64 {
        UInt64.random(in: 0...1000)
    }
}
