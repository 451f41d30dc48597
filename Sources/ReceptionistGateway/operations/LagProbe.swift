import ReceptionistLoop
import ReceptionistModel

/// A timer due every 100 ms whose lateness, measured on the monotonic clock, is the loop's lag,
/// recorded in `/metrics`.
///
/// Loop thread only.
final class LagProbe {
    private var timer: LoopTimer?

    init(loop: EventLoop, metrics: GatewayMetrics) {
        let period = GatewayMetrics.lagProbeMilliseconds
        var due = Clock.monotonicSeconds() + Double(period) / 1000
        let timer = LoopTimer(loop: loop) {
            let now = Clock.monotonicSeconds()
            metrics.loopLag.record(max(0, now - due))
            due = now + Double(period) / 1000
        }
        timer.start(delayMilliseconds: period, repeatMilliseconds: period)
        self.timer = timer
    }

    func close() {
        timer?.close()
        timer = nil
    }
}
