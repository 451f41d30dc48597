import Glibc
import ReceptionistLoop
import ReceptionistModel

/// The timeline of one `ws` process on its loop: subscribe everyone, optionally publish for the
/// duration, wait out the grace period, then close everything so the loop returns.
///
/// Every wait is bounded: subscribing by `--connect-timeout`, publishing by `--duration`, the tail
/// by `--grace`. With `--duration 0` the process holds its subscribers until SIGINT or SIGTERM.
///
/// Loop thread only.
final class WebSocketBenchSession {
    private let loop: EventLoop
    private let run: FanOutRun
    private let options: WebSocketBench
    private let host: String
    private let port: Int
    private var timer: LoopTimer?
    private var signals: [SignalWatcher] = []
    private var publisher: Publisher?
    private var publishSummary: Publisher.Summary?
    private var subscribeSeconds = 0.0
    private var startedAt = 0.0
    private var finished = false

    init(loop: EventLoop, run: FanOutRun, options: WebSocketBench, host: String, port: Int) {
        self.loop = loop
        self.run = run
        self.options = options
        self.host = host
        self.port = port
    }

    func start() throws {
        for number in [SIGINT, SIGTERM] {
            let watcher = try SignalWatcher(loop: loop, signal: number) { [unowned self] _ in finish() }
            // A signal watcher alone must not keep the loop running after everything else closed.
            watcher.setKeepsLoopAlive(false)
            signals.append(watcher)
        }
        // SIGUSR1 starts the presence count afresh: what the frames cost once every subscriber
        // holds the list, not the lists they were sent while the others were still subscribing.
        let restart = try SignalWatcher(loop: loop, signal: SIGUSR1) { [unowned self] _ in
            run.presenceFrames = 0
            run.presenceBytes = 0
        }
        restart.setKeepsLoopAlive(false)
        signals.append(restart)
        startedAt = Clock.monotonicSeconds()
        let timer = LoopTimer(loop: loop) { [unowned self] in
            report("subscribe timed out with \(run.subscribed) of \(run.target)")
            settled()
        }
        self.timer = timer
        timer.start(delayMilliseconds: UInt64(options.connectTimeout * 1000))
        run.onSettled = { [unowned self] in settled() }
        run.start()
    }

    private func settled() {
        guard timer != nil, !finished else { return }
        run.onSettled = nil
        subscribeSeconds = Clock.monotonicSeconds() - startedAt
        timer?.close()
        timer = nil
        report("subscribed \(run.subscribed) of \(run.target) in \(Format.fixed(subscribeSeconds, 2)) s")
        if options.publishRate > 0 {
            let publisher = Publisher(
                loop: loop, host: host, port: port,
                path: Publisher.path(options.publishPath, topic: options.topic), rate: options.publishRate,
                duration: options.duration, connections: options.publishConnections)
            self.publisher = publisher
            publisher.start { [unowned self] summary in
                publishSummary = summary
                self.publisher = nil
                after(options.grace) { [unowned self] in finish() }
            }
        } else if options.duration > 0 {
            after(options.duration + options.grace) { [unowned self] in finish() }
        } else {
            // Held until a signal: keep the loop alive on the subscribers alone.
            report("holding; send SIGTERM to finish")
        }
    }

    private func after(_ seconds: Double, _ body: @escaping () -> Void) {
        let timer = LoopTimer(loop: loop, callback: body)
        self.timer = timer
        timer.start(delayMilliseconds: UInt64(seconds * 1000))
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        timer?.close()
        timer = nil
        for watcher in signals { watcher.close() }
        signals = []
        run.stop()
        // Nothing posts to this loop; closing the mailbox lets it run out of handles once the
        // connections have closed.
        loop.mailbox.shutDown()
    }

    /// Progress goes to standard error so that standard output holds only the summary line.
    private func report(_ line: String) {
        let bytes = Array("receptionist-bench ws: \(line)\n".utf8)
        _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    /// One JSON object on one line.
    var summary: String {
        let histogram = run.histogram
        let span = Double(run.lastDelivery - run.firstDelivery) / 1_000_000
        let perSecond = span > 0 ? Double(run.delivered) / span : 0
        var fields = [
            #""mode":"ws""#,
            #""connections":\#(run.target)"#,
            #""connected":\#(run.connected)"#,
            #""subscribed":\#(run.subscribed)"#,
            #""failed":\#(run.failed)"#,
            #""dropped":\#(run.dropped)"#,
            #""subscribe_s":\#(Format.fixed(subscribeSeconds, 3))"#,
            #""delivered":\#(run.delivered)"#,
            #""delivered_per_s":\#(Format.fixed(perSecond, 1))"#,
            #""first_delivery_us":\#(run.firstDelivery)"#,
            #""last_delivery_us":\#(run.lastDelivery)"#,
            #""p50_ms":\#(Format.fixed(histogram.percentile(0.5) / 1000, 3))"#,
            #""p99_ms":\#(Format.fixed(histogram.percentile(0.99) / 1000, 3))"#,
            #""p999_ms":\#(Format.fixed(histogram.percentile(0.999) / 1000, 3))"#,
            #""histogram_us":\#(histogram.sparseJSON)"#,
            #""bytes":\#(run.groups.reduce(0) { $0 + $1.bytes })"#,
            #""wire_bytes":\#(run.wireBytes)"#,
            #""presence_frames":\#(run.presenceFrames)"#,
            #""presence_bytes":\#(run.presenceBytes)"#,
            #""untimed":\#(run.groups.reduce(0) { $0 + $1.untimed })"#,
            #""first_frame":\#(run.firstFrames.json)"#,
            #""groups":[\#(run.groups.map(\.json).joined(separator: ","))]"#,
        ]
        if run.since != nil { fields.append(#""resume":\#(run.resume.json)"#) }
        if let publishSummary { fields.append(#""publisher":\#(publishSummary.json)"#) }
        if let error = run.firstError {
            let escaped = String(error.map { $0 == "\"" || $0 == "\\" ? "'" : $0 })
            fields.append(#""first_error":"\#(escaped)""#)
        }
        return "{" + fields.joined(separator: ",") + "}"
    }
}
