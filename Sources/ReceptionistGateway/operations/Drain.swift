import Glibc
import Logging
import ReceptionistLoop

/// The drain on SIGTERM or SIGINT: stop accepting, let requests in flight finish, tell streams to
/// go in a spread (invariant 25), and stop the gateway once the last connection has closed or
/// `--drain-timeout` has passed. A second signal closes everything at once.
///
/// Loop thread only.
final class Drain {
    private let loop: EventLoop
    private let table: ConnectionTable
    private let logger: Logger
    private let timeoutSeconds: Double
    private(set) var isDraining = false
    /// Streaming connections still to be told to go, in the order they will be; one that closes
    /// meanwhile has no session left in the table, and is skipped.
    private var queue: [TCPConnection] = []
    private var signals: [SignalWatcher] = []
    private var spreadTimer: LoopTimer?
    private var timeoutTimer: LoopTimer?
    /// Stops accepting connections; called once when the drain begins.
    var onBegin: (() -> Void)?
    /// Stops everything else; called once, when the last connection has closed.
    var onFinished: (() -> Void)?

    init(loop: EventLoop, table: ConnectionTable, timeoutSeconds: Double, logger: Logger) throws {
        self.loop = loop
        self.table = table
        self.timeoutSeconds = timeoutSeconds
        self.logger = logger
        // SIGHUP too: a terminal that went away, or a supervisor's stop, ends the gateway as a
        // stop does, draining, not killed mid-write with its clients told nothing.
        for number in [SIGINT, SIGTERM, SIGHUP] {
            signals.append(try SignalWatcher(loop: loop, signal: number) { [unowned self] number in
                self.signalled(number)
            })
        }
    }

    private func signalled(_ number: Int32) {
        if isDraining {
            logger.warning("second signal: closing every connection now", metadata: ["signal": "\(number)"])
            return table.closeAll()
        }
        begin(reason: number == SIGTERM ? "SIGTERM" : number == SIGHUP ? "SIGHUP" : "SIGINT")
    }

    /// Stops accepting, lets requests in flight finish, then stops the loop.
    func begin(reason: String) {
        guard !isDraining else { return }
        isDraining = true
        logger.info("draining", metadata: ["reason": "\(reason)", "connections": "\(table.count)"])
        onBegin?()
        for session in table.all {
            if session.transport.isStream {
                queue.append(session.connection)
            } else {
                session.drain()
            }
        }
        queue.shuffle()
        spread()
        let timer = LoopTimer(loop: loop) { [unowned self] in
            self.logger.warning("drain timeout: closing remaining connections", metadata: ["count": "\(self.table.count)"])
            self.table.closeAll()
        }
        timer.start(delayMilliseconds: UInt64(timeoutSeconds * 1000))
        timeoutTimer = timer
        table.onEmpty = { [unowned self] in self.finish() }
        if table.isEmpty { finish() }
    }

    private func finish() {
        table.onEmpty = nil
        queue.removeAll()
        timeoutTimer?.close()
        timeoutTimer = nil
        spreadTimer?.close()
        spreadTimer = nil
        for watcher in signals { watcher.close() }
        signals.removeAll()
        onFinished?()
    }

    /// Tells streaming clients to go a few at a time over the first three quarters of the drain
    /// timeout, so that they do not all reconnect to the other nodes at once; the last quarter
    /// leaves time for close handshakes and the last writes.
    private func spread() {
        guard !queue.isEmpty else { return }
        let total = queue.count
        let windowMilliseconds = max(1.0, timeoutSeconds * 750)
        let start = loop.nowMilliseconds
        var told = 0
        let timer = LoopTimer(loop: loop) { [unowned self] in
            let elapsed = Double(self.loop.nowMilliseconds &- start)
            let due = min(total, Int((Double(total) * min(1, elapsed / windowMilliseconds)).rounded(.up)))
            while told < due {
                let connection = self.queue[told]
                told += 1
                self.table.session(of: connection)?.drain()
            }
            if told == total {
                self.queue.removeAll()
                self.spreadTimer?.close()
                self.spreadTimer = nil
            }
        }
        let tick = UInt64(max(5, min(100, windowMilliseconds / Double(total))))
        timer.start(delayMilliseconds: 0, repeatMilliseconds: tick)
        spreadTimer = timer
    }
}
