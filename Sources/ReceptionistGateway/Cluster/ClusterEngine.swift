import Logging
import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// The `redis` engine: every node shares topics and stores through one Redis, on this loop.
///
/// - Writes (a topic message, a store's change set, a new store) are Lua scripts: each one numbers
///   the write, appends it to the topic's or store's stream (`XADD … MAXLEN ~ history`) and
///   publishes a notice on the cluster's channel, in one atomic step.
/// - Every node reads every stream it has heard of from its last entry ID (`XREAD`), when a notice
///   arrives, after its own writes, and after every reconnection. A `StreamCursor` checks that the
///   numbers follow on; a store that skipped (trimmed) or went back (Redis lost its data) is
///   re-read whole from a snapshot script, and a topic that skipped sends its subscribers a `gap`.
/// - Store replicas are changed on one `SerialWorker` thread in stream order; the local
///   `StoreFeed`, receptionists and subscriptions work on them unchanged.
///
/// Loop thread only.
final class ClusterEngine {
    static let readCount = 512

    let loop: EventLoop
    let endpoint: RedisEndpoint
    private let logger: Logger
    private let keys: ClusterKeys
    private let historyLimit: Int
    private let stores: StoreRegistry
    private let applier = SerialWorker()
    private unowned let hub: PushHub
    private let commands: RedisConnection
    private let events: RedisConnection
    private var subscribed = false
    private var reportedUp: Bool?
    private var topicReaders: [String: TopicReader] = [:]
    private var storeReaders: [String: StoreReader] = [:]

    init(loop: EventLoop, endpoint: RedisEndpoint, stores: StoreRegistry, hub: PushHub, historyLimit: Int, logger: Logger) {
        self.loop = loop
        self.endpoint = endpoint
        self.stores = stores
        self.hub = hub
        self.historyLimit = max(1, historyLimit)
        self.logger = logger
        keys = ClusterKeys(database: endpoint.database)
        commands = RedisConnection(loop: loop, endpoint: endpoint, name: "commands")
        events = RedisConnection(loop: loop, endpoint: endpoint, name: "events")
        commands.onConnected = { [unowned self] in self.connectionChanged() }
        commands.onDisconnected = { [unowned self] reason in self.connectionChanged(reason) }
        events.onConnected = { [unowned self] in
            self.events.subscribe(self.keys.channel, subscribed: { [unowned self] in
                self.subscribed = true
                self.connectionChanged()
            }, message: { [unowned self] payload in self.notice(payload) })
        }
        events.onDisconnected = { [unowned self] reason in
            self.subscribed = false
            self.connectionChanged(reason)
        }
    }

    func start() {
        commands.start()
        events.start()
    }

    /// Closes both connections and stops the replica thread. Loop thread, at shutdown.
    func close() {
        commands.close()
        events.close()
        applier.stop()
    }

    /// Both connections are up and the notices are subscribed.
    var isUp: Bool { commands.isConnected && events.isConnected && subscribed }

    /// `/readyz` in cluster mode: 200 either way (the node still serves its connections from its
    /// replicas), with `"redis": "up"` or `"down"` and, when down, why.
    var readiness: Reply {
        if isUp { return .json(.ok, ["status": "ready", "redis": "up"]) }
        let reason = commands.lastError ?? events.lastError ?? "connecting"
        return .json(.ok, ["status": "ready", "redis": "down", "detail": .string(reason)])
    }

    private func connectionChanged(_ reason: String? = nil) {
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
        if up { catchUp() }
    }

    /// After (re)connecting: learn the stores created meanwhile and re-read every stream from
    /// where this node stopped, so nothing published while it was away is missed.
    private func catchUp() {
        commands.send(["SMEMBERS", keys.stores]) { [unowned self] reply in
            for name in reply?.elements?.compactMap(\.text) ?? [] where StoreRegistry.isValidName(name) {
                self.storeReader(name).read()
            }
        }
        for reader in storeReaders.values { reader.read() }
        for reader in topicReaders.values { reader.read() }
    }

    private func notice(_ payload: [UInt8]) {
        switch ClusterKeys.decode(payload) {
        case .storeCreated(let name)?, .storeChanged(let name)?:
            guard StoreRegistry.isValidName(name) else { return }
            storeReader(name).read()
        case .topicPublished(let name)?:
            guard PushHub.isValidTopicName(name) else { return }
            topicReader(name).read()
        case nil:
            logger.debug("unknown cluster notice", metadata: ["payload": "\(String(decoding: payload, as: UTF8.self))"])
        }
    }

    // MARK: Topics

    /// Starts mirroring `name` (PushHub calls this when it creates the topic).
    func watchTopic(_ name: String) {
        _ = topicReader(name)
    }

    private func topicReader(_ name: String) -> TopicReader {
        if let reader = topicReaders[name] { return reader }
        let reader = TopicReader(name: name, engine: self)
        topicReaders[name] = reader
        _ = hub.topic(name)
        reader.read()
        return reader
    }

    /// Publishes through Redis; `completion` gets the message's number once this node has it too.
    func publish(topic name: String, data: [UInt8], completion: @escaping (Result<UInt64, StoreError>) -> Void) {
        guard isUp else { return completion(.failure(.unavailable("Redis is unreachable"))) }
        let reader = topicReader(name)
        let sent = commands.send([
            "EVAL", ClusterScripts.publish, "2", keys.topicSeq(name), keys.topicLog(name), String(historyLimit),
            String(decoding: data, as: UTF8.self), String(Clock.microsecondsSinceEpoch()), keys.channel,
            ClusterKeys.encode(.topicPublished(name)),
        ]) { reply in
            switch reply {
            case .integer(let seq)?:
                reader.waitFor(UInt64(seq), completion)
                reader.read()
            case .error(let text)?:
                completion(.failure(.unavailable("Redis refused the message: \(text)")))
            default:
                completion(.failure(.unavailable("lost the connection to Redis before it answered; the message may or may not be published")))
            }
        }
        if !sent { completion(.failure(.unavailable("Redis is unreachable"))) }
    }

    /// One topic's stream as this node reads it.
    final class TopicReader {
        let name: String
        unowned let engine: ClusterEngine
        var cursor = StreamCursor()
        var reading = false
        var again = false
        private var waiters: [(seq: UInt64, completion: (Result<UInt64, StoreError>) -> Void)] = []

        init(name: String, engine: ClusterEngine) {
            self.name = name
            self.engine = engine
        }

        func waitFor(_ seq: UInt64, _ completion: @escaping (Result<UInt64, StoreError>) -> Void) {
            if cursor.lastNumber >= seq { return completion(.success(seq)) }
            waiters.append((seq, completion))
        }

        func read() {
            guard !reading else { again = true; return }
            again = false
            reading = true
            let sent = engine.commands.send([
                "XREAD", "COUNT", String(ClusterEngine.readCount), "STREAMS", engine.keys.topicLog(name), cursor.lastID,
            ]) { [self] reply in
                reading = false
                guard let reply else { return }  // the connection dropped; the catch-up reads again
                let entries = ClusterEngine.streamEntries(reply)
                let topic = engine.hub.topic(name)
                for entry in entries {
                    guard let seq = entry.number("s") else { continue }
                    let verdict = cursor.accept(id: entry.id, number: seq)
                    let publishedAt = entry.number("t") ?? 0
                    let data = entry.fields["d"] ?? Array("null".utf8)
                    switch verdict {
                    case .next:
                        topic.deliver(seq: seq, publishedAt: publishedAt, data: data)
                    case .gap(let from, let to):
                        topic.skip(from: from, to: to)
                        topic.deliver(seq: seq, publishedAt: publishedAt, data: data)
                    case .duplicate:
                        break
                    case .regressed:
                        engine.logger.error("topic numbering went back: did Redis lose its data?", metadata: ["topic": "\(name)", "seq": "\(seq)"])
                        topic.restart(seq: seq, publishedAt: publishedAt, data: data)
                    }
                }
                if entries.count >= ClusterEngine.readCount || again {
                    read()
                } else if !topic.isSynced {
                    engine.hub.topicSynced(topic)
                }
                let done = waiters.filter { $0.seq <= cursor.lastNumber }
                waiters.removeAll { $0.seq <= cursor.lastNumber }
                for waiter in done { waiter.completion(.success(waiter.seq)) }
            }
            if !sent {
                // Redis is down: serve subscribers from what this node has; the catch-up on
                // reconnection brings the rest, with a gap notice for anything trimmed meanwhile.
                reading = false
                let topic = engine.hub.topic(name)
                if !topic.isSynced { engine.hub.topicSynced(topic) }
            }
        }
    }

    // MARK: Stores

    /// Runs the commit script; see `RedisStoreReplication`.
    func commit(
        store name: String, expectedVersion: UInt64, entry: [UInt8], models: [(String, [UInt8])],
        completion: @escaping @Sendable (ReplicationOutcome) -> Void
    ) {
        guard isUp else { return completion(.failed(.unavailable("Redis is unreachable"))) }
        var arguments: [[UInt8]] = [
            "EVAL", ClusterScripts.commit, "3", keys.storeVersion(name), keys.storeModels(name), keys.storeLog(name),
            String(expectedVersion), String(historyLimit),
        ].map { Array($0.utf8) }
        arguments.append(entry)
        arguments.append(Array(keys.channel.utf8))
        arguments.append(Array(ClusterKeys.encode(.storeChanged(name)).utf8))
        for (id, json) in models {
            arguments.append(Array(id.utf8))
            arguments.append(json)
        }
        let reader = storeReader(name)
        let sent = commands.send(arguments) { reply in
            switch reply {
            case .array(let parts)? where parts.count == 2:
                let code = parts[0].integer ?? -2
                let version = UInt64(max(0, parts[1].integer ?? 0))
                switch code {
                case 1: completion(.committed(version))
                case 0: completion(.conflict(version))
                default: completion(.failed(.noSuchStore(name)))
                }
                reader.read()
            case .error(let text)?:
                completion(.failed(.unavailable("Redis refused the commit: \(text)")))
            default:
                completion(.failed(.unavailable("lost the connection to Redis before it answered; the commit may or may not be applied")))
            }
        }
        if !sent { completion(.failed(.unavailable("Redis is unreachable"))) }
    }

    /// Registers a store in Redis; `completion` gets nil when created.
    func createStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void) {
        guard isUp else { return completion(.unavailable("Redis is unreachable")) }
        let sent = commands.send([
            "EVAL", ClusterScripts.createStore, "2", keys.storeVersion(name), keys.stores, name, keys.channel,
            ClusterKeys.encode(.storeCreated(name)),
        ]) { [unowned self] reply in
            switch reply {
            case .integer(1)?:
                completion(nil)
                storeReader(name).read()
            case .integer?:
                completion(.storeExists(name))
            case .error(let text)?:
                completion(.unavailable("Redis refused: \(text)"))
            default:
                completion(.unavailable("lost the connection to Redis before it answered"))
            }
        }
        if !sent { completion(.unavailable("Redis is unreachable")) }
    }

    private func storeReader(_ name: String) -> StoreReader {
        if let reader = storeReaders[name] { return reader }
        let reader = StoreReader(name: name, engine: self)
        storeReaders[name] = reader
        return reader
    }

    /// One store's stream as this node reads it into its replica.
    final class StoreReader {
        let name: String
        unowned let engine: ClusterEngine
        /// Nil until the first snapshot, and again whenever the replica must be re-read whole.
        var cursor: StreamCursor?
        var reading = false
        var again = false

        init(name: String, engine: ClusterEngine) {
            self.name = name
            self.engine = engine
        }

        func read() {
            guard !reading else { again = true; return }
            again = false
            guard let cursor else { return resync() }
            reading = true
            let sent = engine.commands.send([
                "XREAD", "COUNT", String(ClusterEngine.readCount), "STREAMS", engine.keys.storeLog(name), cursor.lastID,
            ]) { [self] reply in
                reading = false
                guard let reply else { return }
                let entries = ClusterEngine.streamEntries(reply)
                var batch: [(UInt64, [UInt8])] = []
                for entry in entries {
                    guard let version = entry.number("v"), let json = entry.fields["c"] else { continue }
                    switch self.cursor?.accept(id: entry.id, number: version) {
                    case .next?:
                        batch.append((version, json))
                    case .duplicate?, nil:
                        continue
                    case .gap(let from, let to)?:
                        engine.logger.warning("store changes were trimmed before this node read them; re-reading the store", metadata: [
                            "store": "\(name)", "from": "\(from)", "to": "\(to)",
                        ])
                        self.cursor = nil
                    case .regressed?:
                        engine.logger.error("store version went back: did Redis lose its data? Re-reading the store", metadata: ["store": "\(name)"])
                        self.cursor = nil
                    }
                    if self.cursor == nil { break }
                }
                if !batch.isEmpty { apply(batch) }
                if self.cursor == nil || entries.count >= ClusterEngine.readCount || again { read() }
            }
            if !sent { reading = false }
        }

        /// Hands change sets to the replica thread, in order. One that does not fit the replica
        /// (which should not happen) sends the reader back to a snapshot.
        private func apply(_ batch: [(UInt64, [UInt8])]) {
            let store = engine.stores.replica(name)
            let back = LoopBound(self, loop: engine.loop)
            let mailbox = engine.loop.mailbox
            engine.applier.enqueue {
                for (version, json) in batch {
                    if version <= store.version { continue }
                    guard let value = try? JSONParser.parse(json), let entry = ReplicatedChangeSet.decode(value),
                          store.applyReplicated(version: version, committedAt: entry.committedAt, changes: entry.changes)
                    else {
                        _ = mailbox.post {
                            back.value.cursor = nil
                            back.value.read()
                        }
                        return
                    }
                }
            }
        }

        /// Reads the store whole (models, version and last log ID together) and resets the replica.
        private func resync() {
            reading = true
            let keys = engine.keys
            let sent = engine.commands.send([
                "EVAL", ClusterScripts.snapshot, "3", keys.storeVersion(name), keys.storeModels(name), keys.storeLog(name),
            ]) { [self] reply in
                reading = false
                guard let parts = reply?.elements, parts.count == 3, let versionNumber = parts[0].integer,
                      let flat = parts[1].elements, let lastID = parts[2].text
                else { return }
                let version = UInt64(max(0, versionNumber))
                var pairs: [(String, [UInt8])] = []
                var index = 0
                while index + 1 < flat.count {
                    if let id = flat[index].text, let json = flat[index + 1].bytes { pairs.append((id, json)) }
                    index += 2
                }
                cursor = StreamCursor(lastID: lastID, lastNumber: version)
                let store = engine.stores.replica(name)
                let snapshot = pairs
                engine.applier.enqueue {
                    var models: [String: JSONValue] = [:]
                    for (id, json) in snapshot {
                        if let value = try? JSONParser.parse(json) { models[id] = value }
                    }
                    store.resetReplica(models: models, version: version)
                }
                read()
            }
            if !sent { reading = false }
        }
    }

    // MARK: Replies

    struct StreamEntry {
        let id: String
        let fields: [String: [UInt8]]

        func number(_ field: String) -> UInt64? {
            fields[field].flatMap { UInt64(String(decoding: $0, as: UTF8.self)) }
        }
    }

    /// The entries of an `XREAD` reply for one stream: `[[key, [[id, [field, value, …]], …]]]`.
    static func streamEntries(_ reply: RedisReply) -> [StreamEntry] {
        guard let streams = reply.elements, let stream = streams.first?.elements, stream.count == 2,
              let items = stream[1].elements
        else { return [] }
        var entries: [StreamEntry] = []
        entries.reserveCapacity(items.count)
        for item in items {
            guard let parts = item.elements, parts.count == 2, let id = parts[0].text, let flat = parts[1].elements else { continue }
            var fields: [String: [UInt8]] = [:]
            var index = 0
            while index + 1 < flat.count {
                if let name = flat[index].text, let value = flat[index + 1].bytes { fields[name] = value }
                index += 2
            }
            entries.append(StreamEntry(id: id, fields: fields))
        }
        return entries
    }
}
