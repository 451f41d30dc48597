import Prometheus
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// `GET /metrics` in the Prometheus text format, through swift-prometheus's registry.
///
/// The gateway counts in plain loop-thread integers (`GatewayCounters`, the loop's byte counts)
/// so that the fan-out path pays one add per event; a scrape copies them into the registry's
/// collectors and renders. Counters are reset and set to the running total at each scrape, which
/// is sound because only the loop thread scrapes. Loop thread only.
final class GatewayMetrics {
    private let registry = PrometheusCollectorRegistry()
    private let refusals: [Refusal: Counter]
    private let connections: [SessionTransport: Gauge]
    private let counters: [(Counter, (Sample) -> Int)]
    private let gauges: [(Gauge, (Sample) -> Int)]
    private let jobs: [String: Gauge]
    /// How late the loop ran a timer due every `lagProbeMilliseconds`: the loop's responsiveness.
    let loopLag: ValueHistogram
    private var redis: Gauge?
    private var redisPending: Gauge?
    private var disk: [Counter] = []
    private var hooks: HookMetrics?

    static let lagProbeMilliseconds: UInt64 = 100

    /// Everything a scrape reads, gathered on the loop thread.
    struct Sample {
        var counters: GatewayCounters
        var push: PushCounters
        var bytesRead: UInt64
        var bytesWritten: UInt64
        var connections: [SessionTransport: Int]
        var storeSubscriptions: Int
        /// Receptionists serving store subscriptions: one per store and distinct set of options.
        var storeGroups: Int
        var topicSubscriptions: Int
        var stores: Int
        var topics: Int
        var mailboxDepth: Int
        var jobStates: [String]
    }

    init() {
        let registry = registry
        func counter(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Counter {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(namespace: "receptionist", metricName: name, unitName: "total", helpText: help),
                labels: labels)
        }
        func gauge(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Gauge {
            registry.makeGauge(
                descriptor: MetricNameDescriptor(namespace: "receptionist", metricName: name, unitName: "", helpText: help),
                labels: labels)
        }
        refusals = Dictionary(uniqueKeysWithValues: Refusal.allCases.map {
            ($0, counter("refusals", "Clients turned away, by reason (docs/SECURITY.md).", [("reason", $0.rawValue)]))
        })
        connections = Dictionary(uniqueKeysWithValues: SessionTransport.allCases.map {
            ($0, gauge("connections", "Open connections by the protocol they speak.", [("transport", $0.rawValue)]))
        })
        counters = [
            (counter("http_requests", "HTTP requests answered or in progress."), { $0.counters.httpRequests }),
            (counter("messages_in", "Protocol messages received.", [("transport", "websocket")]), { $0.counters.webSocketMessagesIn }),
            (counter("messages_out", "Server messages written to streams.", [("transport", "websocket")]), { $0.counters.webSocketMessagesOut }),
            (counter("messages_out", "Server messages written to streams.", [("transport", "sse")]), { $0.counters.sseMessagesOut }),
            (counter("compression_negotiated", "WebSocket connections that agreed on permessage-deflate."), { $0.counters.compressionNegotiated }),
            (counter("compressed_messages_out", "Server messages sent compressed (permessage-deflate).", [("transport", "websocket")]), { $0.counters.webSocketCompressedOut }),
            (counter("bytes_in", "Bytes read from every socket."), { Int(clamping: $0.bytesRead) }),
            (counter("bytes_out", "Bytes written to every socket."), { Int(clamping: $0.bytesWritten) }),
            (counter("deliveries", "Change sets and topic messages handed to a subscriber."), { $0.push.deliveries }),
            (counter("conflated_change_sets", "Change sets folded into one message for a slow subscriber."), { $0.push.conflatedChangeSets }),
            (counter("resumes", "Subscriptions resumed from a position.", [("kind", "store")]), { $0.push.storeResumes }),
            (counter("resumes", "Subscriptions resumed from a position.", [("kind", "topic")]), { $0.push.topicResumes }),
            (counter("resets", "Store resumes answered with a reset snapshot."), { $0.push.resets }),
            (counter("gaps", "Topic resumes that reported a gap."), { $0.push.gaps }),
            (counter("topic_publishes", "Messages published to topics."), { $0.push.topicPublishes }),
            (counter("topics_forgotten", "Topics forgotten, with their history, after --topic-ttl of quiet."), { $0.push.topicsForgotten }),
            (counter("change_sets", "Store change sets fanned out to subscribers."), { $0.push.changeSetsFannedOut }),
            (counter("presence_frames", "Presence frames queued to presence subscribers."), { $0.push.presenceFrames }),
        ]
        gauges = [
            (gauge("subscriptions", "Live subscriptions.", [("kind", "store")]), { $0.storeSubscriptions }),
            (gauge("subscriptions", "Live subscriptions.", [("kind", "topic")]), { $0.topicSubscriptions }),
            (gauge("store_receptionists", "Receptionists serving store subscribers, one per store and set of subscription options."), { $0.storeGroups }),
            (gauge("stores", "Model stores."), { $0.stores }),
            (gauge("topics", "Topics."), { $0.topics }),
            (gauge("mailbox_depth", "Closures waiting in the loop's mailbox."), { $0.mailboxDepth }),
        ]
        jobs = Dictionary(uniqueKeysWithValues: ["running", "stopped", "failed"].map {
            ($0, gauge("jobs", "Jobs by state.", [("state", $0)]))
        })
        loopLag = registry.makeValueHistogram(
            descriptor: MetricNameDescriptor(
                namespace: "receptionist", metricName: "loop_lag", unitName: "seconds",
                helpText: "How late the loop ran a timer due every 100 ms."),
            buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5])
        gauge("build_info", "The running build.", [("version", BuildInfo.version), ("commit", BuildInfo.commit), ("configuration", BuildInfo.configuration)]).set(Int64(1))
    }

    /// Reports whether the shared engine is reachable (1) or not (0), and the commands waiting
    /// for its replies; absent for the memory engine.
    func setEngine(up: Bool, pendingCommands: Int) {
        if redis == nil {
            redis = registry.makeGauge(
                descriptor: MetricNameDescriptor(
                    namespace: "receptionist", metricName: "redis_up", unitName: "",
                    helpText: "Whether the Redis engine is connected."),
                labels: [])
            redisPending = registry.makeGauge(
                descriptor: MetricNameDescriptor(
                    namespace: "receptionist", metricName: "redis_pending_commands", unitName: "",
                    helpText: "Commands sent to Redis whose replies are still owed (at most --redis-max-pending)."),
                labels: [])
        }
        redis?.set(Int64(up ? 1 : 0))
        redisPending?.set(Int64(pendingCommands))
    }

    /// The disk engine's syncs, the writes they stored, and the writes the disk refused.
    func setDisk(syncs: UInt64, writes: UInt64, failed: UInt64) {
        if disk.isEmpty {
            disk = [
                ("disk_syncs", "Transactions the disk engine committed, each with one sync under --fsync always."),
                ("disk_writes", "Change sets, messages and store changes the disk engine stored (divide by disk_syncs: writes per sync)."),
                ("disk_failed_writes", "Writes the disk refused (full or failing): answered 507, nothing applied."),
            ].map { name, help in
                registry.makeCounter(
                    descriptor: MetricNameDescriptor(namespace: "receptionist", metricName: name, unitName: "total", helpText: help),
                    labels: [])
            }
        }
        for (counter, value) in zip(disk, [syncs, writes, failed]) { set(counter, Int(value)) }
    }

    /// Reports the backend hooks' calls from now on.
    func watch(_ client: HookClient) {
        hooks = HookMetrics(registry: registry, hooks: client)
    }

    func render(_ sample: Sample) -> Reply {
        hooks?.update()
        for (reason, counter) in refusals {
            set(counter, sample.counters.count(reason))
        }
        for (counter, read) in counters {
            set(counter, read(sample))
        }
        for (transport, gauge) in connections {
            gauge.set(Int64(sample.connections[transport, default: 0]))
        }
        for (gauge, read) in gauges {
            gauge.set(Int64(read(sample)))
        }
        for (state, gauge) in jobs {
            gauge.set(Int64(sample.jobStates.count { $0 == state }))
        }
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        headers.add("Cache-Control", "no-store")
        return Reply(HTTPResponse(status: .ok, headers: headers, body: registry.emitToBuffer()))
    }

    private func set(_ counter: Counter, _ total: Int) {
        counter.reset()
        counter.increment(by: Int64(total))
    }
}
