import Logging
import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync

/// Applies one store's Redis stream to this node's replica, in version order, on the replica
/// thread; re-reads the store whole (models, version and last log ID together) when the stream
/// skipped versions (trimmed before this node read them) or went back (Redis lost its data).
///
/// Loop thread only; the replica is changed on `applier`.
final class StoreFollower: StreamFollower {
    let name: String
    private let loop: EventLoop
    private let stores: StoreRegistry
    private let applier: SerialWorker
    private unowned let commands: RedisConnection
    private let keys: ClusterKeys
    private let logger: Logger
    /// Batches handed to the replica thread and not applied yet; at `maxBatchesInFlight` the
    /// reader waits, so at most that many batches of `StreamReader.batch` change sets are queued
    /// for one store.
    private var batchesInFlight = 0
    static let maxBatchesInFlight = 4
    /// Commits waiting for the replica to reach a version, with when each began. The commit's own
    /// deadline (`RedisStoreReplication`, `--redis-timeout`) answers it if the version never
    /// comes; its entry is dropped at the next wait after that deadline, so the list holds at
    /// most one time-out's worth of this node's commits.
    private var waiters: [(version: UInt64, epoch: String?, since: UInt64, answer: (Bool) -> Void)] = []
    /// Set when the store is deleted: a read or a batch still on its way is dropped, so nothing
    /// makes the replica again under the name.
    private var stopped = false
    /// The epoch in which the store was seen going back (a version behind the replica: Redis came
    /// back with older data), and the epochs the replica left. The next snapshot renews such an
    /// epoch in Redis, once for every node.
    private var retired = RetiredEpochs()
    /// An epoch for a store renewed in Redis, of the server's present life (`RedisLife`).
    private let freshEpoch: () -> String
    /// Redis holds no such store and this node no replica: the engine stops following it, so no
    /// follower is kept (and read again at every reconnection) for a store gone.
    private let gone: () -> Void

    init(
        name: String, loop: EventLoop, stores: StoreRegistry, applier: SerialWorker, commands: RedisConnection, keys: ClusterKeys,
        freshEpoch: @escaping () -> String = ModelStore.newEpoch, gone: @escaping () -> Void = {}, logger: Logger
    ) {
        self.freshEpoch = freshEpoch
        self.gone = gone
        self.name = name
        self.loop = loop
        self.stores = stores
        self.applier = applier
        self.commands = commands
        self.keys = keys
        self.logger = logger
    }

    /// The store was deleted. Its commits still waiting for the replica were taken by Redis before
    /// the deletion (one connection, in order): each is answered now, as the log answered it.
    func stop() {
        stopped = true
        let waiting = waiters
        waiters.removeAll()
        for waiter in waiting { waiter.answer(true) }
    }

    /// Calls `answer(true)` once the replica has applied `version` in `epoch` (at once if it has),
    /// or `answer(false)` once it is in another epoch first: Redis lost data, and that version now
    /// names another commit, or none. Entries older than `seconds` are dropped: their commits were
    /// answered by their deadline.
    func whenApplied(_ version: UInt64, epoch: String? = nil, seconds: Double, answer: @escaping (Bool) -> Void) {
        guard !stopped else { return }
        // A replica gone (the store deleted since) answers as Redis did.
        guard let replica = stores.store(name) else { return answer(true) }
        if let epoch, replica.epoch != epoch { return answer(false) }
        guard replica.version < version else { return answer(true) }
        let now = loop.nowMilliseconds
        let span = UInt64(max(0, seconds) * 1000)
        if let oldest = waiters.first, oldest.since + span < now {
            waiters.removeAll { $0.since + span < now }
        }
        waiters.append((version, epoch, now, answer))
    }

    /// Answers the waiters the replica has reached; on the loop, after the replica thread has
    /// applied a batch or a reset.
    private func answerWaiters() {
        guard !stopped, !waiters.isEmpty else { return }
        let replica = stores.store(name)
        let version = replica?.version ?? .max
        // A commit of an epoch the replica has left is not answered by the new epoch's versions.
        func left(_ epoch: String?) -> Bool {
            guard let epoch, let replica else { return false }
            return replica.epoch != epoch
        }
        let settled = waiters.filter { left($0.epoch) || $0.version <= version }
        waiters.removeAll { left($0.epoch) || $0.version <= version }
        for waiter in settled { waiter.answer(!left(waiter.epoch)) }
    }

    var acceptsMore: Bool { batchesInFlight < Self.maxBatchesInFlight }

    func follow(_ entries: [StreamEntry], reader: StreamReader) {
        guard !stopped else { return }
        var batch: [(UInt64, [UInt8])] = []
        // Entries of a store this node holds no replica of (deleted here since) are nobody's.
        guard let replica = stores.store(name) else { return }
        let epoch = Array(replica.epoch.utf8)
        for entry in entries {
            guard let version = entry.number("v"), let json = entry.field("c") else { continue }
            guard var cursor = reader.cursor else { break }
            if let written = entry.field("e"), written != epoch {
                let other = String(decoding: written, as: UTF8.self)
                if retired.left(other) {
                    // An epoch the replica left, back: Redis came back with older data again.
                    logger.error("store went back to an epoch left: did Redis come back with older data?", metadata: ["store": "\(name)"])
                    retired.wentBack = other
                } else {
                    // The store was deleted and made again under the name while this node was not
                    // listening: the entry is the new store's. Read it whole (its subscribers reset).
                    logger.warning("the store was made again under its name; re-reading it", metadata: ["store": "\(name)"])
                }
                reader.cursor = nil
                break
            }
            let verdict = cursor.accept(id: entry.id, number: version)
            reader.cursor = cursor
            switch verdict {
            case .next:
                batch.append((version, json))
            case .duplicate:
                continue
            case .gap(let from, let to):
                logger.warning("store changes were trimmed before this node read them; re-reading the store", metadata: [
                    "store": "\(name)", "from": "\(from)", "to": "\(to)",
                ])
                reader.cursor = nil
            case .regressed:
                logger.error("store version went back: did Redis come back with older data? Re-reading the store", metadata: ["store": "\(name)"])
                retired.wentBack = replica.epoch
                reader.cursor = nil
            }
        }
        if !batch.isEmpty { apply(batch, reader: reader) }
    }

    /// Redis answered a commit with a version behind the replica's, in its epoch: it came back
    /// with older data. Read the store whole in a new epoch.
    func storeWentBack(_ reader: StreamReader) {
        retired.wentBack = stores.store(name)?.epoch
        reader.cursor = nil
        reader.read()
    }

    func caughtUp(_ reader: StreamReader) {}

    func unreachable(_ reader: StreamReader) {}

    /// Hands change sets to the replica thread, in order. One that does not fit the replica
    /// (which should not happen) sends the reader back to a snapshot.
    private func apply(_ batch: [(UInt64, [UInt8])], reader: StreamReader) {
        guard let store = stores.store(name) else { return }
        let back = LoopBound((self, reader), loop: loop)
        let mailbox = loop.mailbox
        batchesInFlight += 1
        let accepted = applier.enqueue {
            var fits = true
            for (version, json) in batch where version > store.version {
                guard let value = try? JSONParser.parseStored(json), let entry = ReplicatedChangeSet.decode(value),
                      store.applyReplicated(version: version, committedAt: entry.committedAt, changes: entry.changes)
                else {
                    fits = false
                    break
                }
            }
            _ = mailbox.post { [fits] in
                let (follower, reader) = back.value
                follower.batchesInFlight -= 1
                follower.answerWaiters()
                if !fits { reader.cursor = nil; reader.read() }
                reader.followerCaughtUp()
            }
        }
        if !accepted {
            // The replica thread is full (many stores at once): this store is re-read whole once
            // there is room, and its subscribers get a reset snapshot, never a silent hole.
            batchesInFlight -= 1
            logger.warning("the replica thread is full; the store will be re-read", metadata: ["store": "\(name)"])
            reader.cursor = nil
        }
    }

    /// Reads the store whole and resets the replica to it; after the store went back, in the epoch
    /// that replaces the one that went back, so no version means two states in one epoch. A
    /// replica merely behind in the store's epoch, whose next versions the log still holds (the
    /// read raced a commit: a creation's notice, a read held back), reads on from the log instead:
    /// its subscribers get those versions as changes, not a reset.
    func resync(_ reader: StreamReader, done: @escaping (StreamCursor?) -> Void) {
        guard !stopped else { return done(nil) }
        let applier = self.applier
        // After the store went back, no version of the old epoch is read on from.
        let heldVersion = retired.wentBack == nil ? stores.store(name)?.version : nil
        let sent = commands.eval(ClusterScripts.snapshot, [
            "4", keys.storeVersion(name), keys.storeModels(name), keys.storeLog(name), keys.storeEpoch(name), freshEpoch(),
            retired.list, keys.channel, ClusterKeys.encode(.storeCreated(name)), keys.life, heldVersion.map { "\($0)" } ?? "",
        ]) { [self] reply in
            // Deleted while the read was on its way: what it brings is of the store deleted.
            guard !stopped else { return done(nil) }
            guard let parts = reply?.elements, parts.count >= 4, let versionNumber = parts[0].integer,
                  let flat = parts[1].elements, let lastID = parts[2].text, let logEpoch = parts[3].text
            else { return done(nil) }
            let version = UInt64(max(0, versionNumber))
            let snapshot = StreamEntry.pairs(flat)
            // No such store in Redis (it lost its data): the replica is emptied into an epoch of
            // its own, so its subscribers are told (a reset snapshot) and no resume mistakes the
            // old numbers for new ones; when the store is made again, its epoch is Redis's. The
            // epoch is made from the one left, so every node's copy names the same.
            let held = stores.store(name)
            // No such store in Redis and no replica here: a notice that came after this node's
            // own deletion of it. Nothing to follow, and no replica made of what is gone.
            if versionNumber < 0, held == nil {
                done(nil)
                return gone()
            }
            let store = held ?? stores.replica(name, epoch: logEpoch)
            // Lost, and the replica holds nothing at version 0 already (emptied at an earlier
            // read: each commit refused 404 reads it again): nothing changes, and no subscriber
            // is reset again.
            if versionNumber < 0, store.modelCount == (0, 0) { return done(StreamCursor(lastID: lastID, lastNumber: 0)) }
            let epoch = versionNumber < 0 ? Self.lostEpoch(after: store.epoch) : logEpoch
            // Where to read on from, if the replica is behind in this epoch (decided on the
            // replica thread, which holds its true version and epoch).
            let onward = parts.count > 4 && retired.wentBack == nil ? parts[4].text.flatMap(StreamCursor.before) : nil
            let readOn = onward.flatMap { id in heldVersion.map { StreamCursor(lastID: id, lastNumber: $0) } }
            retired.wentBack = nil
            let back = LoopBound((self, done), loop: self.loop)
            let mailbox = self.loop.mailbox
            let accepted = applier.enqueue {
                if let readOn, store.epoch == epoch, store.version >= readOn.lastNumber, store.version < version {
                    _ = mailbox.post { back.value.1(readOn) }
                    return
                }
                var models: [String: JSONValue] = [:]
                for model in snapshot {
                    if let value = try? JSONParser.parseStored(model.value) { models[model.name] = value }
                }
                let left = store.epoch
                store.resetReplica(models: models, version: version, epoch: epoch)
                _ = mailbox.post {
                    let (follower, done) = back.value
                    if epoch != left { follower.retired.leave(left) }
                    follower.answerWaiters()
                    done(StreamCursor(lastID: lastID, lastNumber: version))
                }
            }
            if !accepted {
                done(nil)
                reader.readLater()
            }
        }
        if !sent {
            done(nil)
            reader.readLater()
        }
    }

    /// This node has just made the store in Redis, empty at version 0 in `epoch`: a replica left
    /// from before (of a store Redis lost, or one deleted unseen) is made so too, then `then` runs
    /// on the loop. Before that, a write answered right after the creation was computed on the old
    /// store and refused.
    func created(epoch: String, then: @escaping () -> Void) {
        guard let store = stores.store(name), store.epoch != epoch else { return then() }
        let left = store.epoch
        let back = LoopBound((self, then), loop: loop)
        let mailbox = loop.mailbox
        let accepted = applier.enqueue {
            store.resetReplica(models: [:], version: 0, epoch: epoch)
            _ = mailbox.post {
                let (follower, then) = back.value
                follower.retired.leave(left)
                then()
            }
        }
        if !accepted { then() }
    }

    /// The epoch of a store Redis lost, made from the one its replica had: sixteen hex digits, the
    /// same on every node (FNV-1a over the old epoch's bytes), and never the old one.
    static func lostEpoch(after epoch: String) -> String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in epoch.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        let digits = Array("0123456789abcdef".utf8)
        let text = String(decoding: (0..<16).map { digits[Int(hash >> UInt64(60 - 4 * $0) & 0xF)] }, as: UTF8.self)
        return text == epoch ? String(text.reversed()) : text
    }
}
