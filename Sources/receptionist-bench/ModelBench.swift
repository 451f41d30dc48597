import ArgumentParser
import Glibc
import ReceptionistDisk
import ReceptionistGateway
import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync

/// Commits from job threads into one store while a receptionist bounces the changes onto a real
/// loop, and reports commit throughput, deliveries and loop wake-ups per delivery.
struct ModelBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model",
        abstract: "Committed changes per second and receptionist deliveries onto the loop.")

    @Option(help: "Seconds of committing per configuration.")
    var seconds = 2.0

    @Option(parsing: .upToNextOption, help: "Committing thread counts to measure.")
    var threads: [Int] = [1, 2, 4]

    @Option(parsing: .upToNextOption, help: "Changes per change set to measure.")
    var changesPerSet: [Int] = [1, 16]

    @Option(help: "Models in the store.")
    var models = 64

    @Option(help: "Stop each committing thread after this many change sets (for counting instructions: a fixed amount of work).")
    var changeSets: Int?

    @Option(parsing: .upToNextOption, help: "Receptionist policies to measure: coalesce, each.")
    var policies: [String] = ["coalesce", "each"]

    @Option(help: "Change sets the store keeps for resumes (the gateway's --history).")
    var history = 1000

    @Option(parsing: .upToNextOption, help: "Engines to measure: memory, and disk-always / disk-interval (a store kept by the disk engine in a fresh folder under --data-root, with that --fsync).")
    var engines: [String] = ["memory"]

    @Option(help: "Where the disk engine's folders are made (one per configuration, removed after).")
    var dataRoot = "/tmp"

    @Option(help: "Commits a thread has in flight at once: 1 commits and waits (a job's commit); more hands each commit over and goes on, as the HTTP API does; a full window waits until half of it is answered.")
    var window = 1

    func validate() throws {
        guard history >= 1 else { throw ValidationError("--history must be at least 1") }
        guard window >= 1 else { throw ValidationError("--window must be at least 1") }
        for engine in engines where !["memory", "disk-always", "disk-interval"].contains(engine) {
            throw ValidationError("unknown engine '\(engine)'")
        }
    }

    func run() throws {
        let loop = LoopThread()
        print("| engine | policy | threads | changes/set | change sets/s | changes/s | deliveries/s | sets/delivery | loop wake-ups/delivery |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for engine in engines {
            for policy in policies.compactMap({ $0 == "each" ? Receptionist.Policy.each : $0 == "coalesce" ? .coalesce : nil }) {
                for size in changesPerSet {
                    for count in threads {
                        let result = try measure(engine: engine, policy: policy, threads: count, changesPerSet: size, loop: loop)
                        print("| \(engine) " + result.row)
                    }
                }
            }
        }
        loop.stop()
    }

    struct Result {
        let policy: Receptionist.Policy
        let threads: Int
        let changesPerSet: Int
        let seconds: Double
        let changeSets: Int
        let deliveries: Int
        let wakeups: Int

        var row: String {
            let name = policy == .each ? "each" : "coalesce"
            let sets = Double(changeSets) / seconds
            return "| \(name) | \(threads) | \(changesPerSet) | \(Format.count(sets)) | \(Format.count(sets * Double(changesPerSet))) "
                + "| \(Format.count(Double(deliveries) / seconds)) | \(Format.ratio(Double(changeSets) / Double(max(1, deliveries)))) "
                + "| \(Format.ratio(Double(wakeups) / Double(max(1, deliveries)))) |"
        }
    }

    /// What the loop side has applied: touched only by the task on the loop thread, read after.
    final class Applied: Sendable {
        private let state = PThreadLock((version: UInt64(0), deliveries: 0, changeSets: 0))
        func record(version: UInt64, changeSets: Int) {
            state.withLock { $0 = ($0.version < version ? version : $0.version, $0.deliveries + 1, $0.changeSets + changeSets) }
        }
        var version: UInt64 { state.withLock { $0.version } }
        var deliveries: Int { state.withLock { $0.deliveries } }
    }

    /// The store for one configuration: in memory, or kept by a disk engine in a fresh folder
    /// (closed and removed by the returned closure).
    func makeStore(_ engine: String) throws -> (ModelStore, () -> Void) {
        guard engine != "memory" else { return (ModelStore(name: "bench", historyLimit: history), {}) }
        var template = Array((dataRoot + "/receptionist-bench-XXXXXX").utf8CString)
        let directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        let (disk, _) = try DiskEngine.open(DiskOptions(
            directory: directory, fsync: engine == "disk-always" ? .always : .interval, retain: history))
        let store = try StoreRegistry(historyLimit: history, journal: disk).create("bench")
        return (store, {
            disk.close()
            for file in ["receptionist.sqlite3", "receptionist.sqlite3-wal", "receptionist.sqlite3-shm", "lock"] {
                unlink(directory + "/" + file)
            }
            rmdir(directory)
        })
    }

    func measure(engine: String, policy: Receptionist.Policy, threads: Int, changesPerSet: Int, loop: LoopThread) throws -> Result {
        let (store, close) = try makeStore(engine)
        defer { close() }
        try store.commit((0..<models).map { .put(model: "m\($0)", value: ["color": "#000000", "label": .string("m\($0)")]) })
        let applied = Applied()
        let before = loop.mailbox.statistics
        // The task is what the gateway would do on the loop: apply the delivery to its view of the models.
        let receptionist = Receptionist(store: store, policy: policy, target: loop.context) { delivery in
            applied.record(version: delivery.version, changeSets: delivery.changeSetCount)
        }
        let stop = PThreadLock(false)
        let committed = PThreadLock(0)
        let start = Clock.monotonicSeconds()
        // A job names its models and key paths once, as a real one does, not on every change.
        let ids = (0..<models).map { "m\($0)" }
        let color: ModelKeyPath = "color"
        let limit = changeSets ?? Int.max
        let window = self.window
        let workers = (0..<threads).map { t in
            WorkerThread.start { [models] in
                // Commits of this thread not yet answered: at most `window`.
                let inFlight = ConditionLock(0)
                var i = 0
                var operations: [StoreOperation] = []
                while i < limit && !stop.withLock({ $0 }) {
                    for _ in 0..<min(64, limit - i) {
                        operations.removeAll(keepingCapacity: true)
                        for c in 0..<changesPerSet {
                            let model = ids[(t &* 7919 &+ i &* 31 &+ c) % models]
                            operations.append(.set(model: model, keyPath: color, value: .number(JSONNumber(i))))
                        }
                        if window == 1 {
                            try! store.commit(operations)
                        } else {
                            // A full window waits until half of it is answered, not for each
                            // answer: one wake-up per half window, not one per commit.
                            if inFlight.withLock({ $0 >= window }) {
                                inFlight.wait(until: { $0 <= window / 2 }, then: { _ in })
                            }
                            inFlight.withLock { $0 += 1 }
                            store.commit(operations) { result in
                                _ = try! result.get()
                                // Only the answers the committer can be waiting for wake it: the
                                // one that frees half the window, and the last.
                                let wake = inFlight.withLock { count in
                                    count -= 1
                                    return count == window / 2 || count == 0
                                }
                                if wake { inFlight.broadcast() }
                            }
                        }
                        i += 1
                    }
                }
                inFlight.wait(until: { $0 == 0 }, then: { _ in })
                committed.withLock { $0 += i }
            }
        }
        let deadline = start + seconds
        // With a fixed number of change sets the workers stop by themselves; `seconds` is unused.
        if changeSets == nil {
            while Clock.monotonicSeconds() < deadline { usleep(10_000) }
            stop.withLock { $0 = true }
        }
        for worker in workers { worker.join() }
        let elapsed = Clock.monotonicSeconds() - start
        let finalVersion = store.version
        // Bounded wait for the loop to apply the last delivery.
        let settleBy = Clock.monotonicSeconds() + 30
        while applied.version < finalVersion && Clock.monotonicSeconds() < settleBy { usleep(1_000) }
        guard applied.version == finalVersion else {
            throw ValidationError("the receptionist did not deliver version \(finalVersion) (reached \(applied.version))")
        }
        receptionist.cancel()
        let after = loop.mailbox.statistics
        return Result(
            policy: policy, threads: threads, changesPerSet: changesPerSet, seconds: elapsed,
            changeSets: committed.withLock { $0 }, deliveries: applied.deliveries,
            wakeups: after.wakeups - before.wakeups)
    }
}

