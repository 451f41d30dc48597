import Logging
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// The `redis` engine: every node shares topics and stores through Redis, on this loop.
///
/// - Writes (a topic message, a store's change set, a new store) are Lua scripts
///   (`ClusterScripts`): each one numbers the write, appends it to the topic's or store's stream
///   and publishes a notice on the cluster's channel, in one atomic step.
/// - Every node follows every stream it has heard of (`StreamReader`) when a notice arrives,
///   after its own writes, and after every reconnection: topics into the hub
///   (`TopicFollower`), stores into their replicas (`StoreFollower`).
/// - With several servers (`--redis-url` repeated), each topic and store lives on one of them
///   (`ShardMap`), with its keys, its log and its notices; each server has its own `RedisLink`
///   and reconnects on its own, and a server that is down makes only its own topics and stores
///   answer 503.
///
/// Loop thread only.
final class ClusterEngine: TopicSource, StoreSource, EngineHealth {
    let loop: EventLoop
    /// One link per server, in `--redis-url` order.
    let shards: [RedisLink]
    private let logger: Logger
    /// Messages a node keeps of each topic: what it reads of a topic's log when it first hears of it.
    private let historyLimit: Int
    /// What each log keeps in Redis.
    let redisHistory: RedisHistory
    /// How long a write waits for Redis before it is answered 503 (`--redis-timeout`).
    let timeoutSeconds: Double
    let stores: StoreRegistry
    /// The thread store replicas are changed on, in stream order: not the loop (a receptionist
    /// may block on the loop for backpressure) and not the job pool (whose threads wait for it).
    let applier = SerialWorker()
    unowned let hub: PushHub
    /// This node in the cluster's presence: random, new with every start.
    let nodeID: String
    /// `--heartbeat-timeout`: a node silent this long is taken for dead.
    let heartbeatTimeoutMilliseconds: UInt64
    private var heartbeatTimer: LoopTimer?
    /// Renews the keys of the topics followed here (`renewFollowedTopics`).
    private var renewalTimer: LoopTimer?
    /// Read by the history lookups (`ClusterEngine+History`).
    var topicReaders: [String: (reader: StreamReader, follower: TopicFollower)] = [:]
    private var storeReaders: [String: (reader: StreamReader, follower: StoreFollower)] = [:]
    /// Publishes waiting for the end of the loop iteration, one batcher per server, in `shards` order.
    private(set) var publishers: [PublishBatcher] = []
    /// Store commits waiting for the end of the loop iteration, likewise.
    private(set) var committers: [CommitBatcher] = []

    init(
        loop: EventLoop, endpoints: [RedisEndpoint], stores: StoreRegistry, hub: PushHub, historyLimit: Int,
        redisHistory: RedisHistory, maxPendingCommands: Int, timeoutSeconds: Double, heartbeatTimeoutSeconds: Double = 3,
        logger: Logger
    ) {
        heartbeatTimeoutMilliseconds = UInt64(max(0.3, heartbeatTimeoutSeconds) * 1000)
        let nodeID = ModelStore.newEpoch()
        self.nodeID = nodeID
        precondition(!endpoints.isEmpty, "the redis engine needs a server")
        self.redisHistory = redisHistory
        self.timeoutSeconds = timeoutSeconds
        self.loop = loop
        self.stores = stores
        self.hub = hub
        self.historyLimit = max(1, historyLimit)
        self.logger = logger
        let stall = heartbeatTimeoutMilliseconds
        shards = endpoints.map { RedisLink(loop: loop, endpoint: $0, node: nodeID, stallMilliseconds: stall, logger: logger) }
        for link in shards {
            link.commands.maxPendingCommands = maxPendingCommands
            link.onUp = { [unowned self, unowned link] in self.catchUp(link) }
            link.onNotice = { [unowned self] payload in self.notice(payload) }
        }
        publishers = shards.map { link in
            PublishBatcher(loop: loop, flushNow: { [unowned link] in link.commands.flushNow() }) { [unowned self, unowned link] batch, waiters in self.send(batch, waiters, to: link) }
        }
        committers = shards.map { link in
            CommitBatcher(loop: loop, flushNow: { [unowned link] in link.commands.flushNow() }) { [unowned self, unowned link] batch, waiters in self.send(batch, waiters, to: link) }
        }
    }

    func start() {
        for link in shards { link.start() }
        let timer = LoopTimer(loop: loop) { [unowned self] in self.beat() }
        let period = max(100, heartbeatTimeoutMilliseconds / 3)
        timer.start(delayMilliseconds: period, repeatMilliseconds: period)
        heartbeatTimer = timer
        let renewal = LoopTimer(loop: loop) { [unowned self] in self.renewFollowedTopics() }
        let every = min(max(redisHistory.topicKeysRenewalMilliseconds, 50), 60_000)
        renewal.start(delayMilliseconds: every, repeatMilliseconds: every)
        renewalTimer = renewal
    }

    /// Closes every connection and stops the replica thread. Loop thread, at shutdown.
    func close() {
        heartbeatTimer?.close()
        heartbeatTimer = nil
        renewalTimer?.close()
        renewalTimer = nil
        // The drain has closed every connection: this node's entries go now (each link writes
        // what it was given before it disconnects), not when the heartbeat times out.
        hub.presenceRelay.shareAll()
        for link in shards { link.close() }
        applier.stop()
    }

    /// The server that holds `name` (a topic's or a store's).
    func shard(_ name: String) -> RedisLink {
        shards[ShardMap.index(of: name, shards: shards.count)]
    }

    /// Whether the server holding `name` can be written to.
    func isUp(for name: String) -> Bool { shard(name).isUp }

    // MARK: EngineHealth (every server)

    var name: String { "redis" }

    var isUp: Bool { shards.allSatisfy(\.isUp) }

    var downReason: String? {
        let down = shards.filter { !$0.isUp }
        guard !down.isEmpty else { return nil }
        if shards.count == 1 { return down[0].downReason }
        return down.map { "\($0.endpoint): \($0.downReason ?? "connecting")" }.joined(separator: "; ")
    }

    var pendingCommands: Int { shards.reduce(0) { $0 + $1.pendingCommands } }

    /// After (re)connecting to a server: learn the stores created on it meanwhile and re-read every
    /// stream it holds from where this node stopped, so nothing published while away is missed.
    private func catchUp(_ link: RedisLink) {
        // A store this node followed and Redis no longer holds was deleted (or lost) while
        // away, and its notice missed: it is read whole, so its replica and subscribers are
        // reset into an epoch of their own rather than left serving what is gone.
        let followed = Set(storeReaders.keys.filter { shard($0) === link })
        _ = link.commands.send(["SMEMBERS", link.keys.stores]) { [unowned self] reply in
            guard let names = reply?.elements?.compactMap(\.text) else { return }
            for name in names where StoreRegistry.isValidName(name) {
                self.storeReader(name).read()
            }
            for name in followed.subtracting(names) { self.resyncStore(name) }
            // One deleted and made again while away, and not written since, has an empty log:
            // no entry names its new epoch. Its epoch tells it.
            for name in followed.intersection(names) { self.checkEpoch(name, on: link) }
        }
        for (name, following) in storeReaders where shard(name) === link { following.reader.read() }
        for (name, pair) in topicReaders where shard(name) === link { pair.reader.read() }
        // Presence written while away was dropped, and the server may have lost what it had.
        hub.presenceRelay.reshare(where: { [unowned self] in self.shard($0) === link })
    }

    private func notice(_ payload: [UInt8]) {
        switch ClusterKeys.decode(payload) {
        case .storeCreated(let name)?:
            // A store created anew (perhaps after Redis lost the old one) has a new epoch: read it whole.
            guard StoreRegistry.isValidName(name) else { return }
            resyncStore(name)
        case .storeChanged(let name)?:
            guard StoreRegistry.isValidName(name) else { return }
            storeReader(name).read()
        case .storeDeleted(let name, let epoch)?:
            // This node's own deletion has dropped its replica already (`deleteStore`), and a
            // store made again since under the name has another epoch: both are left alone.
            guard StoreRegistry.isValidName(name) else { return }
            guard stores.dropReplica(name, epoch: epoch) else {
                // No replica yet, a read of it on its way (its creation's notice came first):
                // what that read brings is of the store deleted. A store made again since is
                // read on its own notice, which comes after this one.
                if stores.store(name) == nil { stopFollowing(name) }
                return
            }
            stopFollowing(name)
            hub.storeDeleted(name)
        case .topicPublished(let name, let seq, let epoch, let id)?:
            guard PushHub.isValidTopicName(name) else { return }
            let (reader, follower) = topicReader(name)
            // Read unless this node has the message (its own publish, mirrored from Redis's answer
            // already, or about to be).
            guard let seq, let epoch else { return reader.read() }
            follower.noticed(seq, epoch: epoch, id: id, reader: reader)
        case .topicCarried(let name, let messages, let numbered)?:
            guard PushHub.isValidTopicName(name) else { return }
            let (reader, follower) = topicReader(name)
            // The next messages of what this node has: mirrored from the notice, with no read.
            if follower.mirror(messages, numbered: numbered, reader: reader) { return }
            let last = numbered.first + UInt64(messages.count) - 1
            follower.noticed(last, epoch: numbered.epoch, id: numbered.lastID, reader: reader)
        case .presenceChanged(let target, let node)?:
            guard node != nodeID, PushHub.isValidTopicName(target.name) else { return }
            hub.presenceRelay.changed(target)
        case nil:
            logger.debug("unknown cluster notice", metadata: ["payload": "\(String(decoding: payload, as: UTF8.self))"])
        }
    }

    /// Reads the store whole if Redis holds it in another epoch than this node's replica.
    private func checkEpoch(_ name: String, on link: RedisLink) {
        _ = link.commands.send(["GET", link.keys.storeEpoch(name)]) { [unowned self] reply in
            guard let epoch = reply?.text, let replica = stores.store(name), replica.epoch != epoch,
                  storeReaders[name] != nil
            else { return }
            resyncStore(name)
        }
    }

    // MARK: Topics

    /// Starts mirroring `name` (the hub calls this when it creates the topic).
    func watchTopic(_ name: String) {
        _ = topicReader(name)
    }

    func topicReader(_ name: String) -> (reader: StreamReader, follower: TopicFollower) {
        if let pair = topicReaders[name] { return pair }
        let link = shard(name)
        let follower = TopicFollower(
            name: name, hub: hub, commands: link.commands, keys: link.keys, tail: historyLimit,
            waitMilliseconds: UInt64(timeoutSeconds * 1000), keysMilliseconds: redisHistory.topicKeysMilliseconds,
            freshEpoch: { [life = link.life] in life.freshEpoch() }, logger: logger)
        let reader = StreamReader(
            key: link.keys.topicLog(name), cursor: nil, commands: link.commands, follower: follower, retry: { [unowned link] in link.readLater($0) })
        topicReaders[name] = (reader, follower)
        _ = hub.topic(name)
        reader.read()
        return (reader, follower)
    }

    /// Stops mirroring `name`, which the hub forgets next (quiet for `--topic-ttl`), unless
    /// something is under way for it: a read, or a publish of this node's waiting for Redis or
    /// for the mirror (false). Redis keeps the topic's log; a notice or a subscriber brings the
    /// topic back, read from it anew.
    func stopMirroring(_ name: String) -> Bool {
        guard let (reader, follower) = topicReaders[name] else { return true }
        publishers[ShardMap.index(of: name, shards: shards.count)].sendPending()
        guard reader.isIdle, follower.isIdle else { return false }
        topicReaders[name] = nil
        return true
    }

    // MARK: Stores

    /// Reads a store whole from Redis again (models, version, epoch), resetting the replica.
    func resyncStore(_ name: String) {
        let reader = storeReader(name)
        reader.cursor = nil
        reader.read()
    }

    /// The newest version the store's stream reader has seen.
    func storeLatest(_ name: String) -> UInt64? {
        storeCursor(name)?.lastNumber
    }

    /// Where this node's reading of a store's log stands, if it follows the store.
    func storeCursor(_ name: String) -> StreamCursor? {
        storeReaders[name]?.reader.cursor
    }

    private func storeReader(_ name: String) -> StreamReader {
        storeFollowing(name).reader
    }

    func storeFollowing(_ name: String) -> (reader: StreamReader, follower: StoreFollower) {
        if let following = storeReaders[name] { return following }
        let link = shard(name)
        let follower = StoreFollower(
            name: name, loop: loop, stores: stores, applier: applier, commands: link.commands, keys: link.keys,
            freshEpoch: { [life = link.life] in life.freshEpoch() }, gone: { [unowned self] in stopFollowing(name) }, logger: logger)
        let reader = StreamReader(
            key: link.keys.storeLog(name), cursor: nil, commands: link.commands, follower: follower, retry: { [unowned link] in link.readLater($0) })
        storeReaders[name] = (reader, follower)
        return (reader, follower)
    }

    /// Registers a store in Redis; `completion` gets nil when created.
    func createStore(_ name: String, completion: @escaping (StoreError?) -> Void) {
        let link = shard(name), keys = link.keys
        guard link.isUp else { return completion(.unavailable(link.refusal)) }
        let epoch = link.life.freshEpoch()
        // Commits made before run before it, as a connection sent them (invariant 58).
        committers[ShardMap.index(of: name, shards: shards.count)].sendPending()
        let sent = link.commands.eval(ClusterScripts.createStore, [
            "3", keys.storeVersion(name), keys.stores, keys.storeEpoch(name), name, keys.channel,
            ClusterKeys.encode(.storeCreated(name)), epoch,
        ]) { [unowned self] reply in
            switch reply {
            case .integer(1)?:
                // The replica is made in the store's epoch, so it is never seen in another.
                stores.replica(name, epoch: epoch)
                storeFollowing(name).follower.created(epoch: epoch) { [unowned self] in
                    completion(nil)
                    resyncStore(name)
                }
            case .integer?:
                completion(.storeExists(name))
            case .error(let text)?:
                completion(.unavailable("Redis refused: \(text)"))
            default:
                completion(.outcomeUnknown("lost the connection to Redis before it answered; the store may or may not be created"))
            }
        }
        if !sent { completion(.unavailable(link.refusal)) }
    }

    /// Deletes a store in Redis; `completion` gets nil when deleted. This node's replica is
    /// dropped before the answer (its subscribers are told by the caller), so a store made again
    /// at once is a new replica; the other nodes drop theirs when the notice reaches them.
    func deleteStore(_ name: String, completion: @escaping (StoreError?) -> Void) {
        let link = shard(name), keys = link.keys
        guard link.isUp else { return completion(.unavailable(link.refusal)) }
        committers[ShardMap.index(of: name, shards: shards.count)].sendPending()
        let sent = link.commands.eval(ClusterScripts.deleteStore, [
            "5", keys.storeVersion(name), keys.storeModels(name), keys.storeLog(name), keys.storeEpoch(name), keys.stores,
            name, keys.channel, ClusterKeys.encode(.storeDeleted(name, epoch: "")),
        ]) { [unowned self] reply in
            switch reply {
            case .string?:
                stores.dropReplica(name, epoch: nil)
                stopFollowing(name)
                completion(nil)
            case .null?:
                completion(.noSuchStore(name))
            case .error(let text)?:
                completion(.unavailable("Redis refused: \(text)"))
            default:
                completion(.outcomeUnknown("lost the connection to Redis before it answered; the store may or may not be deleted"))
            }
        }
        if !sent { completion(.unavailable(link.refusal)) }
    }

    /// Stops reading a deleted store's log; a read already sent is ignored when it answers.
    private func stopFollowing(_ name: String) {
        storeReaders.removeValue(forKey: name)?.follower.stop()
    }
}
