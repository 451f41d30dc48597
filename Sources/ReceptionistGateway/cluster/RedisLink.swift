import Logging
import ReceptionistLoop

/// The node's two connections to one Redis server (a shard) and their health: one for commands,
/// one subscribed to the cluster's notice channel on that server and to this node's own channel
/// (where other nodes' publishes are noticed; `ClusterScripts.publish`). Both reconnect with
/// backoff on their own; the link is up only when both are connected and the channels are
/// subscribed. Going up or down is logged once.
///
/// Loop thread only.
final class RedisLink: EngineHealth {
    let endpoint: RedisEndpoint
    /// The keys and the notice channel on this server.
    let keys: ClusterKeys
    /// Commands and scripts; replies come back in order.
    let commands: RedisConnection
    private let events: RedisConnection
    /// This node's own channel on this server (`ClusterKeys.nodeChannel`).
    let nodeChannel: String
    /// The cluster's channel, then this node's.
    private let channels: [String]
    private let logger: Logger
    private var subscribed = false
    private var reportedUp: Bool?
    /// Called each time the link comes up (the engine re-reads what it may have missed).
    var onUp: (() -> Void)?
    /// Called with every notice published on either channel.
    var onNotice: (([UInt8]) -> Void)?

    init(loop: EventLoop, endpoint: RedisEndpoint, node: String, logger: Logger) {
        self.endpoint = endpoint
        keys = ClusterKeys(database: endpoint.database)
        nodeChannel = keys.nodeChannel(node)
        channels = [keys.channel, nodeChannel]
        self.logger = logger
        commands = RedisConnection(loop: loop, endpoint: endpoint, name: "commands")
        events = RedisConnection(loop: loop, endpoint: endpoint, name: "events")
        commands.onConnected = { [unowned self] in self.changed() }
        commands.onDisconnected = { [unowned self] reason in self.changed(reason) }
        events.onConnected = { [unowned self] in
            _ = self.events.subscribe(self.channels, subscribed: { [unowned self] in
                self.subscribed = true
                self.changed()
            }, message: { [unowned self] payload in self.onNotice?(payload) })
        }
        events.onDisconnected = { [unowned self] reason in
            self.subscribed = false
            self.changed(reason)
        }
    }

    func start() {
        commands.start()
        events.start()
    }

    func close() {
        commands.close()
        events.close()
    }

    // MARK: EngineHealth

    var name: String { "redis" }

    var isUp: Bool { commands.isConnected && events.isConnected && subscribed }

    var downReason: String? {
        isUp ? nil : commands.lastError ?? events.lastError ?? "connecting"
    }

    /// Why a command could not be sent: no connection, or too many replies owed already.
    var refusal: String {
        commands.isSaturated
            ? "Redis \(endpoint) is not keeping up: \(commands.pendingCommands) commands wait for it (--redis-max-pending); retry later"
            : "Redis \(endpoint) is unreachable"
    }

    var pendingCommands: Int { commands.pendingCommands }

    private func changed(_ reason: String? = nil) {
        let up = isUp
        if up != reportedUp {
            if up {
                logger.info("redis up", metadata: ["redis": "\(endpoint)"])
            } else if reportedUp != nil || reason != nil {
                logger.warning("redis down: commits and publishes answer 503 until it is back", metadata: [
                    "redis": "\(endpoint)", "reason": "\(reason ?? "connecting")",
                ])
            }
            reportedUp = up
        }
        if up { onUp?() }
    }
}
