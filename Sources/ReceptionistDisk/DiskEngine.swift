import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync
import Synchronization

/// The `disk` engine: the gateway's stores and topics in one SQLite database (WAL mode) in a data
/// directory, written by one thread of its own, never the loop's.
///
/// Writes wait in one bounded queue; the writer takes everything waiting, writes it in one
/// transaction and commits it with one sync (group commit), then settles it: a store's change
/// sets on the notifier thread (observers may block on the loop's backpressure, which must never
/// hold up the disk), a topic's messages through their completions.
///
/// Any thread.
public final class DiskEngine: StoreJournal, Sendable {
    public let options: DiskOptions

    private struct Queue {
        var writes: [DiskWrite] = []
        /// The bytes of the topic messages among `writes` (`maxQueuedMessageBytes`).
        var messageBytes = 0
        var stopping = false
        /// Tests hold the writer here to fill the queue (`holdWriter`).
        var held = false
    }

    private let queue = ConditionLock(Queue())
    /// Settles store change sets in the order the writer stored them.
    let notifier: SerialWorker
    /// Batches stored and not yet settled: the writer waits past `options.maxUnsettledBatches`, so
    /// a store observer that blocks (on the loop's backpressure) holds the disk back, never grows
    /// memory.
    private let unsettledBatches = ConditionLock(0)
    /// Writes stored in one transaction, at most.
    static let maxBatch = 1024
    private let finished = ConditionLock(false)
    private let lock: Confined<DataDirectoryLock>
    /// Syncs (commits of a batch) and the writes they carried, for `/metrics`.
    public let syncs = Atomic<UInt64>(0)
    public let syncedWrites = Atomic<UInt64>(0)
    /// Writes refused because the disk refused them (full, failed).
    public let failedWrites = Atomic<UInt64>(0)

    /// Locks `options.directory`, opens its database (refusing one that is not ours or damaged),
    /// loads what it holds and starts the writer. Throws why the directory cannot be used.
    public static func open(_ options: DiskOptions) throws(DiskError) -> (DiskEngine, DiskContents) {
        let lock = try DataDirectoryLock(directory: options.directory)
        let db = try DiskSchema.open(options.directory, fsync: options.fsync, heldData: lock.heldData)
        try lock.markHeldData()
        var contents = try DiskSchema.load(
            db, path: options.directory + "/" + DiskSchema.fileName, retain: options.retainOf, topicHistory: options.topicHistory)
        do {
            contents.idempotencyKeys = try DiskIdempotencyTable.load(db, options: options, now: Clock.microsecondsSinceEpoch())
        } catch {
            throw DiskError("the data file is damaged (\(error)); refusing to use it")
        }
        let writer: DiskWriter
        let life = ModelStore.newEpoch()
        do {
            let meta = try DiskMeta.read(db)
            let boot = DiskSchema.bootID(file: options.bootIDFile)
            // Only writes acknowledged before they were synced can be lost, and only by a machine
            // that went down with them: a process that crashed leaves them to the kernel. A boot
            // that cannot be named may be another one.
            let lostTail = meta.clean == false && meta.fsync == DiskOptions.Fsync.interval.rawValue && (boot == nil || meta.boot != boot)
            // A data file put back from a copy goes back in time: what was given out after the
            // copy would be given out again under the same numbers.
            let recorded = lock.lives
            contents.replacedDataFile = !recorded.isEmpty && meta.life.map { !recorded.contains($0) } ?? false
            if lostTail || contents.replacedDataFile {
                contents = DiskMeta.renewEpochs(contents)
                contents.newEpochs = true
            }
            // Until the database names this run, it may still name the one it named (or, for a
            // copy put back, whatever the lock file took before): a start that fails part way
            // leaves the next one to judge the database as this one did.
            let earlier = contents.replacedDataFile ? recorded : meta.life.map { [$0] } ?? []
            try lock.record(lives: [life] + earlier)
            writer = try DiskWriter(db: db, options: options, contents: contents)
            try DiskMeta.write(db, clean: false, fsync: options.fsync.rawValue, boot: boot ?? "", life: life, epochsFrom: contents)
        } catch let error as DiskError {
            throw error
        } catch {
            throw DiskError("cannot write to the data directory: \(error)")
        }
        try lock.record(lives: [life])
        let engine = DiskEngine(options: options, lock: lock)
        engine.start(Confined(writer))
        return (engine, contents)
    }

    private init(options: DiskOptions, lock: DataDirectoryLock) {
        self.options = options
        self.lock = Confined(lock)
        notifier = SerialWorker(maxQueued: .max)
    }

    private func start(_ writer: Confined<DiskWriter>) {
        WorkerThread.start { [self] in
            let writer = writer.value
            let interval = options.fsync == .interval ? options.intervalSeconds : 3600
            while true {
                let maxUnsettled = options.maxUnsettledBatches
                unsettledBatches.wait(until: { $0 < maxUnsettled }, then: { _ in })
                let (batch, stopping) = queue.wait(
                    seconds: interval, until: { (!$0.writes.isEmpty && !$0.held) || $0.stopping },
                    then: { queue, _ -> ([DiskWrite], Bool) in
                        // At most `maxBatch` a transaction: the committers refill the queue while
                        // a batch is written, instead of waiting for one batch of everything.
                        guard queue.writes.count > Self.maxBatch else {
                            defer {
                                queue.writes.removeAll(keepingCapacity: true)
                                queue.messageBytes = 0
                            }
                            return (queue.writes, queue.stopping)
                        }
                        let batch = Array(queue.writes.prefix(Self.maxBatch))
                        queue.writes.removeFirst(Self.maxBatch)
                        queue.messageBytes -= batch.reduce(0) { $0 + $1.messageBytes }
                        return (batch, false)
                    })
                queue.broadcast()
                if !batch.isEmpty { writer.write(batch, engine: self) }
                writer.checkpointIfDue(now: Clock.microsecondsSinceEpoch())
                if stopping && batch.isEmpty { break }
            }
            writer.close()
            notifier.enqueue { [self] in
                finished.withLock { $0 = true }
                finished.broadcast()
            }
            notifier.stop()
        }.detach()
    }

    /// Hands `write` to the writer; waits while the queue is full when `wait`, else refuses.
    /// `beyondLimit`: queued even past `maxQueued` (never while stopping). Only for a claimed
    /// idempotency key's answer or release: each claim was queued under the limit, and the keys
    /// are bounded (`--idempotency-keys`), so those writes are too.
    private func enqueue(_ write: DiskWrite, wait: Bool, beyondLimit: Bool = false) -> Bool {
        let accepted: Bool
        if beyondLimit {
            accepted = queue.withLock { queue in
                guard !queue.stopping else { return false }
                queue.writes.append(write)
                return true
            }
        } else if wait {
            accepted = queue.wait(until: { $0.writes.count < options.maxQueued || $0.stopping }) { queue in
                guard !queue.stopping else { return false }
                queue.writes.append(write)
                return true
            }
        } else {
            accepted = queue.withLock { queue in
                let bytes = write.messageBytes
                guard queue.writes.count < options.maxQueued, !queue.stopping,
                      bytes == 0 || queue.messageBytes == 0 || queue.messageBytes + bytes <= options.maxQueuedMessageBytes
                else { return false }
                queue.writes.append(write)
                queue.messageBytes += bytes
                return true
            }
        }
        if accepted { queue.broadcast() }
        return accepted
    }

    /// Everything queued now, for the writer to add to the transaction it is writing (a snapshot
    /// of a store's models waits for change sets still queued). Nothing while the writer is held.
    func takeQueued() -> [DiskWrite] {
        let taken: [DiskWrite] = queue.withLock { queue in
            guard !queue.held else { return [] }
            defer {
                queue.writes.removeAll(keepingCapacity: true)
                queue.messageBytes = 0
            }
            return queue.writes
        }
        if !taken.isEmpty { queue.broadcast() }
        return taken
    }

    /// Counts a transaction of `batch` writes, `stored` of them stored (`/metrics`); one that
    /// failed (`committed` false) is no sync. Writer thread, before any of them is answered.
    func counted(batch: Int, stored: Int, committed: Bool = true) {
        if committed { syncs.add(1, ordering: .relaxed) }
        syncedWrites.add(UInt64(stored), ordering: .relaxed)
        if stored < batch { failedWrites.add(UInt64(batch - stored), ordering: .relaxed) }
    }

    /// Runs `body` once the notifier has settled what was stored before it; counted against
    /// `options.maxUnsettledBatches`. Writer thread.
    func settleLater(_ body: @escaping @Sendable () -> Void) {
        unsettledBatches.withLock { $0 += 1 }
        notifier.enqueue { [unsettledBatches] in
            body()
            unsettledBatches.withLock { $0 -= 1 }
            unsettledBatches.broadcast()
        }
    }

    /// Tests only: holds the writer (true) so that writes stay queued, or lets it go.
    func holdWriter(_ held: Bool) {
        queue.withLock { $0.held = held }
        queue.broadcast()
    }

    // MARK: StoreJournal

    public func append(_ record: JournalRecord, of store: ModelStore) {
        guard enqueue(.change(record, store), wait: true) else {
            let generation = record.generation
            notifier.enqueue { store.unsettle(generation: generation, because: .unavailable("the gateway is shutting down")) }
            return
        }
    }

    public func createStore(_ store: ModelStore) throws(StoreError) {
        try runAndWait { .createStore(store, $0) }
    }

    public func deleteStore(_ name: String) throws(StoreError) {
        try runAndWait { .deleteStore(name, $0) }
    }

    private func runAndWait(_ write: (DiskSignal) -> DiskWrite) throws(StoreError) {
        let signal = DiskSignal()
        guard enqueue(write(signal), wait: true) else { throw .unavailable("the gateway is shutting down") }
        if let error = signal.wait(seconds: 30) { throw error }
    }

    // MARK: Topics

    /// Stores a topic's message `seq` (one above the last stored for the topic, else refused);
    /// `completion` runs on the writer thread, with nil once it is stored. False, and no
    /// completion, when the queue is full: the loop never waits here.
    public func appendMessage(
        topic: String, epoch: String, seq: UInt64, publishedAt: UInt64, data: [UInt8],
        completion: @escaping @Sendable (StoreError?) -> Void
    ) -> Bool {
        enqueue(.message(DiskMessage(topic: topic, epoch: epoch, seq: seq, publishedAt: publishedAt, data: data, completion: completion)), wait: false)
    }

    /// Stores a change to the idempotency keys after every write queued before it; `completion`
    /// runs on the writer thread once it is stored (nil) or not. False, and no completion, when
    /// the queue is full: the caller never waits here.
    public func recordIdempotency(_ change: DiskIdempotencyChange, completion: (@Sendable (StoreError?) -> Void)? = nil) -> Bool {
        // A claim is refused when the queue is full; its answer or release never is: refused, a
        // request answered to its client left its key claimed for good on disk, and a retry after
        // a restart got 409, then a second write once the window passed.
        let beyondLimit: Bool
        switch change {
        case .claim: beyondLimit = false
        case .answer, .release: beyondLimit = true
        }
        return enqueue(.idempotency(DiskIdempotencyWrite(change: change, completion: completion)), wait: false, beyondLimit: beyondLimit)
    }

    /// `recordIdempotency`, waiting until the change is stored (nil) or refused, at most `seconds`:
    /// for a thread that answers its request only after the key holds the answer.
    public func recordIdempotencyAndWait(_ change: DiskIdempotencyChange, seconds: Double) -> StoreError? {
        let signal = DiskSignal()
        guard recordIdempotency(change, completion: { signal.finish($0) }) else {
            return .unavailable("the disk's write queue is full (\(options.maxQueued) writes)")
        }
        return signal.wait(seconds: seconds)
    }

    /// Deletes a topic and its messages (forgotten after `--topic-ttl`). False, and nothing
    /// queued, when the queue is full.
    public func forgetTopic(_ name: String) -> Bool {
        enqueue(.forgetTopic(name), wait: false)
    }

    /// Writes what is queued, marks the directory cleanly closed, and releases it. Waits for the
    /// writer (at shutdown, once every job has ended). Idempotent.
    /// How long `close` waits for the writer by default: a disk that hangs past it does not hold
    /// the process.
    public static let closeTimeoutSeconds = 30.0

    /// Lets the writer store what is queued, mark the directory clean and end, for at most
    /// `seconds`. Returns false if it did not end in time: the directory is then left as a crash
    /// leaves it (what was acknowledged under `--fsync always` is on disk; a store or topic that
    /// may have lost its tail starts a new epoch at the next start), and its lock goes with the
    /// process.
    @discardableResult
    public func close(timeoutSeconds seconds: Double = DiskEngine.closeTimeoutSeconds) -> Bool {
        queue.withLock { $0.stopping = true }
        queue.broadcast()
        guard finished.wait(seconds: seconds, until: { $0 }, then: { ended, _ in ended }) else { return false }
        lock.value.release()
        return true
    }
}

/// A value handed to one other thread once, before that thread starts, and never touched by the
/// handing thread again (or, for the directory lock, touched only after the writer has ended).
/// That hand-over is the only sharing, so no two threads ever use it at once.
final class Confined<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
