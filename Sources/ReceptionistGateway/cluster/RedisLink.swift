import Logging
import ReceptionistLoop

/// The node's two connections to one Redis server (a shard) and their health: one for commands,
/// one subscribed to the cluster's notice channel on that server and to this node's own channel
/// (where other nodes' publishes are noticed; `ClusterScripts.publish`). Both reconnect with
/// backoff on their own; the link is up only when both are connected, the channels are
/// subscribed, and Redis answers: a heartbeat unanswered for `--heartbeat-timeout` (Redis frozen,
/// or a network that holds the connection open and carries nothing) takes the link down until
/// one is answered. Going up or down is logged once.
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
    /// The server's life (`RedisLife`), learned on the command connection before it writes.
    let life = RedisLife()
    private var lifeLearned = false
    /// Bumped by each attempt to learn the life and by each lost connection: an answer to an
    /// older attempt is not acted on.
    private var lifeAttempt = 0
    /// An attempt is under way on the current connection.
    private var learningLife = false
    /// When the oldest heartbeat still unanswered was sent (the loop's milliseconds), if any.
    private var beatSentAt: UInt64?
    /// How long a heartbeat may go unanswered before the link counts as down.
    private let stallMilliseconds: UInt64
    private var reportedUp: Bool?
    /// The echo on this node's own channel (`checkNotices`): published, and when Redis said so.
    private var echoSentAt: UInt64?
    private var echoPublishedAt: UInt64?
    private static let echo: [UInt8] = [UInt8(ascii: "e")]
    /// Called each time the link comes up (the engine re-reads what it may have missed).
    var onUp: (() -> Void)?
    /// Run once, the next time the link comes up (`whenUp`).
    private var nextUp: [() -> Void] = []
    /// Stream reads refused for want of room (`StreamReader.waitsForRoom`), made again at the
    /// next heartbeats as room allows: at most one entry per stream followed.
    private var refusedReads: [StreamReader] = []
    /// Called with every notice published on either channel.
    var onNotice: (([UInt8]) -> Void)?

    init(loop: EventLoop, endpoint: RedisEndpoint, node: String, stallMilliseconds: UInt64, logger: Logger) {
        self.endpoint = endpoint
        self.stallMilliseconds = stallMilliseconds
        keys = ClusterKeys(database: endpoint.database)
        nodeChannel = keys.nodeChannel(node)
        channels = [keys.channel, nodeChannel]
        self.logger = logger
        commands = RedisConnection(loop: loop, endpoint: endpoint, name: "commands")
        events = RedisConnection(loop: loop, endpoint: endpoint, name: "events")
        commands.onConnected = { [unowned self] in self.startLearningLife() }
        commands.onDisconnected = { [unowned self] reason in
            self.beatSentAt = nil
            self.echoCame()
            self.lifeLearned = false
            self.learningLife = false
            self.lifeAttempt &+= 1
            self.changed(reason)
        }
        events.onConnected = { [unowned self] in
            _ = self.events.subscribe(self.channels, subscribed: { [unowned self] in
                self.subscribed = true
                self.changed()
            }, message: { [unowned self] payload in
                if payload == Self.echo { return self.echoCame() }
                self.onNotice?(payload)
            })
        }
        events.onDisconnected = { [unowned self] reason in
            self.subscribed = false
            self.echoCame()
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

    var isUp: Bool { isConnected && isAnswering }

    /// Both connections are up and the channels subscribed (whether Redis answers or not).
    var isConnected: Bool { commands.isConnected && events.isConnected && subscribed && lifeLearned }

    /// No heartbeat has waited for its answer past the stall limit.
    private var isAnswering: Bool {
        guard let sent = beatSentAt else { return true }
        return commands.loop.nowMilliseconds - sent < stallMilliseconds
    }

    var downReason: String? {
        if isUp { return nil }
        if isConnected { return "Redis has not answered for \(stallMilliseconds) ms" }
        return commands.lastError ?? events.lastError ?? "connecting"
    }

    /// Why a command could not be sent: no connection, no answer for a while, or too many
    /// replies owed already.
    var refusal: String {
        if commands.isSaturated {
            return "Redis \(endpoint) is not keeping up: \(commands.pendingCommands) commands wait for it (--redis-max-pending); retry later"
        }
        if isConnected && !isAnswering { return "Redis \(endpoint) has not answered for \(stallMilliseconds) ms; retry later" }
        return "Redis \(endpoint) is unreachable"
    }

    /// Before each heartbeat: a link that has stopped answering is reported down (logged once,
    /// as a lost connection is), and comes back up with the next answer (`beatAnswered`).
    func checkAnswering() {
        if reportedUp == true, !isUp { changed(downReason) }
    }

    /// A heartbeat is sent; the link is down if none is answered within the stall limit.
    func beatSent() {
        if beatSentAt == nil { beatSentAt = commands.loop.nowMilliseconds }
    }

    /// A heartbeat was answered: Redis answers.
    func beatAnswered() {
        let wasUp = isUp
        beatSentAt = nil
        if !wasUp { changed() }
    }

    var pendingCommands: Int { commands.pendingCommands }

    /// At each heartbeat: nothing is ever written on the notice connection, so a flow the network
    /// dropped without a reset (a NAT's or firewall's time-out, a host gone) would carry nothing
    /// more, unnoticed: this node's notices would stop and it would stay ready. So the node
    /// publishes an echo to its own channel; once Redis has answered that publish, the echo must
    /// come back on the notice connection within the stall limit, or the connection is dropped
    /// and made again, and the engine re-reads what it missed. A publish Redis answers with no
    /// receiver at all means Redis has no such subscription: dropped at once. A Redis that answers
    /// nothing (frozen) drops nothing: the heartbeat reports that.
    func checkNotices() {
        guard isConnected else { return echoCame() }
        let now = commands.loop.nowMilliseconds
        if echoSentAt != nil {
            if let published = echoPublishedAt, now - published >= stallMilliseconds {
                dropNotices("no notice came back for \(now - published) ms")
            }
            return
        }
        let sent = commands.send(["PUBLISH", nodeChannel, String(decoding: Self.echo, as: UTF8.self)]) { [weak self] reply in
            guard let self, echoSentAt == now else { return }
            // Not published (the connection was lost, or Redis refused): nothing to wait for.
            guard reply?.integer != nil else { return echoCame() }
            echoPublishedAt = commands.loop.nowMilliseconds
            if reply?.integer == 0, isConnected { dropNotices("Redis holds no subscription for this node") }
        }
        if sent { echoSentAt = now }
    }

    private func echoCame() {
        echoSentAt = nil
        echoPublishedAt = nil
    }

    private func dropNotices(_ reason: String) {
        logger.warning("redis notice connection is dead; connecting it again", metadata: ["redis": "\(endpoint)", "reason": "\(reason)"])
        echoCame()
        events.drop(because: reason)
    }

    /// A stream read the command connection had no room for: read again at a heartbeat.
    func readLater(_ reader: StreamReader) {
        refusedReads.append(reader)
    }

    /// At each heartbeat: the reads refused for want of room, as many as half the room left
    /// allows, oldest first; the rest wait for the next heartbeat.
    func retryRefusedReads() {
        guard isUp, !refusedReads.isEmpty else { return }
        let room = (commands.maxPendingCommands - commands.pendingCommands) / 2
        guard room > 0 else { return }
        let now = refusedReads.prefix(room)
        refusedReads.removeFirst(now.count)
        for reader in now {
            reader.waitsForRoom = false
            reader.read()
        }
    }

    /// At each heartbeat: a connection whose life check Redis refused (`-LOADING` while it reads
    /// its data back after a restart, `-BUSY`, `-OOM`, `-NOPERM`) asks again, so the link comes
    /// up once Redis takes it. Asked once only, it stayed down for as long as the connection lived.
    func learnLifeIfRefused() {
        guard commands.isConnected, !lifeLearned, !learningLife else { return }
        startLearningLife()
    }

    private func startLearningLife() {
        lifeAttempt &+= 1
        let attempt = lifeAttempt
        learningLife = true
        learnLife { [unowned self] learned in
            guard attempt == self.lifeAttempt else { return }
            self.learningLife = false
            guard learned else { return }
            self.lifeLearned = true
            self.changed()
        }
    }

    /// Asks the server for its run and whether it keeps every write, then for its life, naming a
    /// new one if it may have lost writes since (`ClusterScripts.life`); `done(true)` once it is
    /// known, `done(false)` if Redis refused or the connection was lost. Nothing is written
    /// meanwhile: the link is not up. A connection lost on the way asks again when it is back; a
    /// refusal, at the next heartbeat (`learnLifeIfRefused`).
    private func learnLife(_ done: @escaping (Bool) -> Void) {
        let commands = self.commands, keys = self.keys, life = self.life, logger = self.logger, endpoint = self.endpoint
        let sent = commands.send(["INFO", "server"]) { info in
            guard let info else { return done(false) }
            let run = info.text.flatMap(RedisLife.runID(inInfo:)) ?? ""
            let sent = commands.send(["CONFIG", "GET", "append*"]) { config in
                guard let config else { return done(false) }
                // A server that does not let its configuration be read is taken as one that may lose writes.
                let keeps = RedisLife.keepsEveryWrite(config: config.elements?.compactMap(\.text) ?? [])
                let named = RedisLife.newName()
                let sent = commands.eval(ClusterScripts.life, ["2", keys.run, keys.life, run, named, keeps ? "1" : "0"]) { reply in
                    guard let name = reply?.text else {
                        if let reply {
                            logger.warning("redis did not name its life; asking again at the next heartbeat", metadata: [
                                "redis": "\(endpoint)", "reply": "\(reply)",
                            ])
                        }
                        return done(false)
                    }
                    if name == named, !life.name.isEmpty {
                        logger.warning(
                            "redis started again and may have lost writes: every topic and store starts a new epoch at its next use",
                            metadata: ["redis": "\(endpoint)"])
                    }
                    life.learn(name)
                    done(true)
                }
                if !sent { done(false) }
            }
            if !sent { done(false) }
        }
        if !sent { done(false) }
    }

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
        if up {
            let actions = nextUp
            nextUp = []
            for action in actions { action() }
            onUp?()
        }
    }

    /// Runs `action` the next time the link comes up, for a command whose answer a lost
    /// connection took. Never at once: hiredis hands a lost connection's replies back before the
    /// link hears of the loss, and it may still look up. At most one per command in flight when a
    /// connection was lost, so bounded by `--redis-max-pending`.
    func whenUp(_ action: @escaping () -> Void) {
        nextUp.append(action)
    }
}
