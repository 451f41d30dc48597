import ReceptionistDisk
import ReceptionistWire

/// Everything the gateway is told at start-up. Durations are in seconds, sizes in bytes.
public struct GatewayConfig: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// The static directory, read once at start-up.
    public var publicDirectory = "Public"
    public var parserLimits = HTTPParserLimits()
    /// A keep-alive connection with no request in progress is closed after this long.
    public var idleTimeoutSeconds = 60.0
    /// A request head must arrive completely within this long of its first byte.
    public var headTimeoutSeconds = 10.0
    /// Connections beyond this get a 503 and are closed.
    public var maxConnections = 10_000
    /// How long a drain may take before the remaining connections are closed; WebSocket and SSE
    /// clients are told to go in a spread over the first three quarters of it.
    public var drainTimeoutSeconds = 10.0
    /// A closed-for-writing connection is read out for at most this long before it is closed.
    public var lingerSeconds = 2.0
    /// Per-connection outbound bytes past which the gateway stops reading that connection's requests.
    public var maxQueuedBytes = 1024 * 1024
    /// Worker threads for store mutations and jobs.
    public var jobThreads = 2
    /// Store requests and commits waiting for a job thread; more are refused at once.
    public var maxQueuedWork = 65_536
    /// Change sets each store keeps for resuming subscribers.
    public var historyLimit = 1000
    /// The most bytes of messages each topic, and of change sets each store, keeps in memory;
    /// past it the oldest go, as past `historyLimit`.
    public var historyBytes = 16 * 1024 * 1024
    /// A topic nobody publishes to or follows is forgotten, with its history, after this long; 0
    /// keeps topics for good.
    public var topicTTLSeconds = 86_400.0
    /// The most topics kept at once; a publish that would make one more is refused.
    public var maxTopics = 100_000
    /// The most stores; a creation past it is refused.
    public var maxStores = 10_000
    /// Create the `tiles` demo store and animate it at `demoRate` change sets per second.
    public var demo = false
    public var demoRate = 30.0
    /// The largest WebSocket message a client may send (all fragments together).
    public var maxMessageBytes = 64 * 1024
    /// A WebSocket peer quiet for this long is pinged.
    public var pingIntervalSeconds = 30.0
    /// A pinged peer that sends nothing for this long is closed.
    public var pingTimeoutSeconds = 10.0
    /// An SSE stream with nothing to send gets a heartbeat comment this often.
    public var sseHeartbeatSeconds = 15.0
    /// Most milliseconds subscribers' writes wait to leave together while the loop is busy writing
    /// (they wait as long as the last such flush took, within 1 ms and this).
    public var writeDelayMilliseconds: UInt64 = 10
    /// Offer permessage-deflate (RFC 7692) to WebSocket clients that ask for it.
    public var compression = true
    /// Server frames shorter than this go uncompressed even to a client that negotiated compression.
    public var compressionMinBytes = 256
    /// Presence joins and leaves are collected and sent to presence subscribers at most this often.
    public var presenceIntervalSeconds = 1.0
    /// Past this many members, presence subscribers get the counts only.
    public var presenceMaxMembers = 1000
    /// Serve `/ws/echo`, which echoes every message (for WebSocket conformance suites).
    public var enableEcho = false
    /// The `disk` engine (`--data-dir`): stores and topics kept in a data directory; nil keeps
    /// them in memory (or in Redis, with `redisURLs`).
    public var disk: DiskOptions?
    /// The `redis` engine's servers (`redis://host:port/db`), each holding a share of the topics
    /// and stores (every node lists them in the same order); empty runs the `memory` engine, alone.
    public var redisURLs: [String] = []
    /// Commands the `redis` engine may have waiting for Redis's replies; past it writes answer 503.
    public var redisMaxPendingCommands = 10_000
    /// How long a publish or commit waits for Redis before it is answered 503.
    public var redisTimeoutSeconds = 10.0
    /// How long after its last heartbeat a node is taken for dead: its members leave presence.
    public var heartbeatTimeoutSeconds = 3.0
    /// Entries each topic's and store's log keeps in Redis (about: Redis trims in whole nodes),
    /// from which any node resumes a client whose `since` left its own history.
    public var redisHistory = 10_000
    /// The most seconds a log entry is kept in Redis; 0 keeps entries until `redisHistory` pushes
    /// them out.
    public var redisHistoryTTLSeconds = 0.0
    /// How long a topic's keys stay in Redis after its last publish, or after the last node that
    /// follows it renewed them; then Redis deletes them, and the topic starts again in a new
    /// epoch. 0 keeps them for good.
    public var redisTopicTTLSeconds = 2_592_000.0

    // Trust: see docs/SECURITY.md.
    /// Keys that mutating API calls must present as `Authorization: Bearer`; empty means none is
    /// needed, and then the gateway listens on loopback only unless `insecureOpen` is set.
    public var apiKeys: [String] = []
    public var insecureOpen = false
    /// The HS256 secret for subscription tokens; nil means subscriptions need no token.
    public var tokenSecret: String?
    /// Origins allowed to open WebSockets and call the API from a browser; empty means same-origin only.
    public var allowedOrigins: [String] = []
    public var maxConnectionsPerAddress = 1024
    public var maxSubscriptionsPerConnection = 64
    /// Publishes and store mutations, per API key (or per client address without keys).
    public var publishRate = RateLimit(perSecond: 1000, burst: 2000)
    /// How long an `Idempotency-Key` is remembered after its first use.
    public var idempotencyWindowSeconds = 300.0
    /// The most idempotency keys remembered at once (in a cluster, across every node); past it
    /// the oldest are forgotten first, and the window holds only as long as they last.
    public var maxIdempotencyKeys = 100_000
    /// The backend's hooks (`docs/HOOKS.md`); none is called unless its URL is set.
    public var hooks = HookSettings()
    /// Settings for groups of topic and store names (`namespaces` in the config file).
    public var namespaces = Namespaces()
    /// Protocol messages a WebSocket client may send.
    public var clientMessageRate = RateLimit(perSecond: 50, burst: 100)

    public init() {}
}
