import Prometheus

/// The backend hooks' figures in `/metrics`: calls and failures by hook, the calls under way and
/// waiting, and how long answered calls took. Loop thread only.
final class HookMetrics {
    private unowned let hooks: HookClient
    private let calls: [HookKind: Counter]
    private let failures: [HookKind: Counter]
    private let inFlight: Gauge
    private let queued: Gauge

    init(registry: PrometheusCollectorRegistry, hooks: HookClient) {
        self.hooks = hooks
        let kinds = HookKind.allCases.filter { hooks.isSet($0) }
        func counters(_ name: String, _ help: String) -> [HookKind: Counter] {
            Dictionary(uniqueKeysWithValues: kinds.map { kind in
                (kind, registry.makeCounter(
                    descriptor: MetricNameDescriptor(namespace: "receptionist", metricName: name, unitName: "total", helpText: help),
                    labels: [("hook", kind.rawValue)]))
            })
        }
        func gauge(_ name: String, _ help: String) -> Gauge {
            registry.makeGauge(
                descriptor: MetricNameDescriptor(namespace: "receptionist", metricName: name, unitName: "", helpText: help), labels: [])
        }
        calls = counters("hook_calls", "Calls to the backend's hooks, by hook.")
        failures = counters("hook_failures", "Hook calls with no usable answer (time-out, 5xx, unreachable, queue full), by hook.")
        inFlight = gauge("hook_in_flight", "Hook calls under way (at most --hook-max-inflight).")
        queued = gauge("hook_queued", "Hook calls waiting for one under way to end (at most --hook-max-queued).")
        let latency = Dictionary(uniqueKeysWithValues: kinds.map { kind in
            (kind, registry.makeValueHistogram(
                descriptor: MetricNameDescriptor(
                    namespace: "receptionist", metricName: "hook_latency", unitName: "seconds",
                    helpText: "How long answered hook calls took, waiting included, by hook."),
                labels: [("hook", kind.rawValue)],
                buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]))
        })
        hooks.observeLatency = { kind, seconds in latency[kind]?.record(seconds) }
    }

    func update() {
        for (kind, counter) in calls {
            counter.reset()
            counter.increment(by: Int64(hooks.stats.calls[kind, default: 0]))
        }
        for (kind, counter) in failures {
            counter.reset()
            counter.increment(by: Int64(hooks.stats.failures[kind, default: 0]))
        }
        inFlight.set(Int64(hooks.inFlight))
        queued.set(Int64(hooks.queued))
    }
}
