import ReceptionistDisk
import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// `/healthz`, `/readyz` and `/metrics`, and whether the gateway takes new streams.
///
/// `/readyz` answers 503 while draining; with a shared engine it answers 200 either way (the node
/// still serves its connections from its replicas) and names the engine's state.
///
/// Loop thread only.
final class OperationsEndpoints {
    private let loop: EventLoop
    private let drain: Drain
    private let table: ConnectionTable
    private let hub: PushHub
    private let stores: StoreRegistry
    private let jobs: JobRunner
    private let counters: GatewayCounters
    private let metrics: GatewayMetrics
    private weak var engine: (any EngineHealth)?
    /// The disk engine, when stores and topics are kept in a data directory.
    private let disk: DiskEngine?
    // Constant answers are built once; copies share their storage.
    private let healthy = Reply(.json(.ok, "{\"status\":\"ok\"}"))
    private let ready = Reply(.json(.ok, "{\"status\":\"ready\"}"))
    private let draining = Reply(.json(.serviceUnavailable, "{\"status\":\"draining\"}"))
    /// A new stream's answer while the gateway drains: an error like any other (`/readyz`'s
    /// `draining` is a probe's status, not an error).
    private let refusedWhileDraining = Reply.error(.serviceUnavailable, "the gateway is draining; connect to another node")

    init(
        loop: EventLoop, drain: Drain, table: ConnectionTable, hub: PushHub, stores: StoreRegistry, jobs: JobRunner,
        counters: GatewayCounters, metrics: GatewayMetrics, engine: (any EngineHealth)?, disk: DiskEngine?
    ) {
        self.loop = loop
        self.drain = drain
        self.table = table
        self.hub = hub
        self.stores = stores
        self.jobs = jobs
        self.counters = counters
        self.metrics = metrics
        self.engine = engine
        self.disk = disk
    }

    /// The answer for an operations path, computed when called; nil for any other path.
    func answer(_ path: Substring) -> (() -> Reply)? {
        switch path {
        case "/healthz": { self.healthy }
        case "/readyz": { self.readiness() }
        case "/metrics": { self.renderMetrics() }
        default: nil
        }
    }

    /// The 503 a new stream gets while the gateway drains (clients reconnect to another node).
    var refusingStreams: Reply? { drain.isDraining ? refusedWhileDraining : nil }

    private func readiness() -> Reply {
        if drain.isDraining { return draining }
        guard let engine else { return ready }
        if engine.isUp { return .json(.ok, ["status": "ready", engine.name: "up"]) }
        return .json(.ok, ["status": "ready", engine.name: "down", "detail": .string(engine.downReason ?? "connecting")])
    }

    private func renderMetrics() -> Reply {
        if let engine { metrics.setEngine(up: engine.isUp, pendingCommands: engine.pendingCommands) }
        if let disk {
            metrics.setDisk(
                syncs: disk.syncs.load(ordering: .relaxed), writes: disk.syncedWrites.load(ordering: .relaxed),
                failed: disk.failedWrites.load(ordering: .relaxed))
        }
        return metrics.render(GatewayMetrics.Sample(
            counters: counters, push: hub.counters, bytesRead: loop.bytesRead, bytesWritten: loop.bytesWritten,
            connections: table.countByTransport(),
            storeSubscriptions: hub.storeSubscriberCount, storeGroups: hub.storeGroupCount, topicSubscriptions: hub.topicSubscriberCount,
            stores: stores.count, topics: hub.topics.count,
            mailboxDepth: loop.mailbox.statistics.depth,
            jobStates: jobs.allJobs.map { $0.info.state.name }))
    }
}
