import ReceptionistTestSupport
import Synchronization
import Testing

@testable import ReceptionistLoop

@Suite struct EventLoopTests {
    /// Stands in for a subscriber's connection: counts its flush.
    private final class Flushable: LoopFlushable {
        let id: Int
        let onFlush: (Int) -> Void

        init(id: Int, onFlush: @escaping (Int) -> Void) {
            self.id = id
            self.onFlush = onFlush
        }

        func flush() { onFlush(id) }
    }

    /// 300 connections whose delay is over are written 128 at a time, one slice per turn, each
    /// once and in the order they started to wait; a timer due at once runs between the slices,
    /// as a socket's read or a new connection would.
    @Test(.timeLimit(.minutes(10)))
    func aDelayedFlushIsWrittenInSlicesWithTheLoopsWorkBetweenThem() {
        let seen = Mutex<(flushed: [Int], between: [Int], delay: UInt64)>(([], [], 0))
        let loop = LoopThread { loop in
            // A loop busy writing: the delay is on.
            var delay = WriteDelay(maxDelayMilliseconds: 5, busyWritesPerSecond: 1)
            delay.tick(now: 0)
            delay.noteWrite()
            delay.tick(now: 1_000)
            loop.writeDelay = delay
            var probe: LoopTimer?
            var probeArmed = false
            probe = LoopTimer(loop: loop) {
                probeArmed = false
                let done = seen.withLock { state in
                    state.between.append(state.flushed.count)
                    state.delay = loop.writeDelay.delayMilliseconds
                    return state.flushed.count == 300
                }
                if done {
                    probe?.close()
                    probe = nil
                    loop.mailbox.shutDown()
                }
            }
            let connections = (0..<300).map { id in
                Flushable(id: id) { id in
                    seen.withLock { $0.flushed.append(id) }
                    if !probeArmed {
                        probeArmed = true
                        probe?.start(delayMilliseconds: 0)
                    }
                }
            }
            for connection in connections { loop.scheduleDelayedFlush(connection) }
        }
        #expect(loop.waitUntilStopped(seconds: 10))
        let (flushed, between, delay) = seen.withLock { $0 }
        #expect(flushed == Array(0..<300))
        #expect(between == [128, 256, 300])
        #expect(delay == 1, "writes that took no time make the next wait the shortest")
    }
}
