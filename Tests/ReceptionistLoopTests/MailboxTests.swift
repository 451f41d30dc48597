import Dispatch
import Foundation
import Glibc
import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

@Suite struct MailboxTests {
    /// Loop-thread-only bookkeeping for the test.
    /// Why `@unchecked Sendable` is safe: only closures running on the loop thread touch it, and the
    /// test reads it after the loop thread has finished (the semaphore orders the accesses).
    final class Record: @unchecked Sendable {
        var next = [Int](repeating: 0, count: 8)
        var total = 0
        var offLoop = 0
        var outOfOrder = 0
    }

    @Test(.timeLimit(.minutes(10)))
    func everyPostRunsOnceInOrderOnTheLoop() async throws {
        let threads = 8, perThread = 100_000
        let loop = LoopThread()
        let record = Record()
        let mailbox = loop.mailbox

        let group = DispatchGroup()
        for t in 0..<threads {
            group.enter()
            Thread {
                for i in 0..<perThread {
                    let result = mailbox.post {
                        if !loop.isLoopThread { record.offLoop += 1 }
                        if record.next[t] != i { record.outOfOrder += 1 }
                        record.next[t] = i + 1
                        record.total += 1
                    }
                    precondition(result == .accepted)
                }
                group.leave()
            }.start()
        }
        #expect(group.wait(timeout: .now() + 90) == .success)
        #expect(mailbox.post { mailbox.shutDown() } == .accepted)
        #expect(loop.waitUntilStopped(seconds: 30))

        #expect(record.total == threads * perThread)
        #expect(record.offLoop == 0)
        #expect(record.outOfOrder == 0)
        #expect(record.next == [Int](repeating: perThread, count: threads))
        let stats = mailbox.statistics
        #expect(stats.posts == threads * perThread + 1)
        // Wake-ups coalesce: the loop is signalled only when pending work goes from none to some,
        // plus once per `maxRoundsPerWakeup` batches in a flood.
        #expect(stats.signals * 10 <= stats.posts, "signals \(stats.signals) for \(stats.posts) posts")
        #expect(stats.wakeups <= stats.signals)
        #expect(stats.depth == 0)
    }

    @Test(.timeLimit(.minutes(10)))
    func postsAfterShutdownAreRefusedAndEarlierOnesRun() async throws {
        let loop = LoopThread()
        let ran = Mutex(0)
        let mailbox = loop.mailbox
        // Hold the loop inside one job so the following posts queue up behind the shutdown.
        let gate = DispatchSemaphore(value: 0)
        #expect(mailbox.post { gate.wait() } == .accepted)
        #expect(mailbox.post { mailbox.shutDown() } == .accepted)
        for _ in 0..<100 {
            #expect(mailbox.post { ran.withLock { $0 += 1 } } == .accepted)
        }
        gate.signal()
        #expect(loop.waitUntilStopped(seconds: 10))
        #expect(ran.withLock { $0 } == 100)
        #expect(mailbox.isClosed)
        #expect(mailbox.post { ran.withLock { $0 += 1000 } } == .refused)
        #expect(ran.withLock { $0 } == 100)
    }

    /// A shutdown asked from a job runs what was posted before the jobs posted after it: the
    /// rest of the drain's batch first. Before, the jobs posted during the shutdown went first.
    @Test(.timeLimit(.minutes(1)))
    func aShutdownFromAJobKeepsPostOrder() async throws {
        let loop = LoopThread()
        let order = Mutex<[String]>([])
        let mailbox = loop.mailbox
        let gate = DispatchSemaphore(value: 0)
        #expect(mailbox.post { gate.wait() } == .accepted)
        #expect(mailbox.post {
            order.withLock { $0.append("X") }
            _ = mailbox.post { order.withLock { $0.append("C") } }
            mailbox.shutDown()
        } == .accepted)
        #expect(mailbox.post { order.withLock { $0.append("Y") } } == .accepted)
        gate.signal()
        #expect(loop.waitUntilStopped(seconds: 10))
        #expect(order.withLock { $0 } == ["X", "Y", "C"])
        #expect(mailbox.isClosed)
    }

    /// Loop-thread-only record of a flood. Why `@unchecked Sendable` is safe: only the loop thread
    /// touches it (the set-up, the posted jobs and the timer run there), and the test reads it
    /// after the loop thread has finished.
    final class Flood: @unchecked Sendable {
        var timer: LoopTimer?
        var ran = 0
        /// How many jobs had run when the timer fired.
        var firedAfter: Int?
    }

    /// A chain of `jobs` posts, each posting the next after spinning for `eachMilliseconds`; the
    /// first starts a timer due at once. Returns how many jobs had run when it fired (nil if it
    /// had not by the last), and the mailbox's wake-ups.
    private func flood(jobs: Int, eachMilliseconds: Double) -> (firedAfter: Int?, wakeups: Int) {
        let flood = Flood()
        let loop = LoopThread { loop in
            flood.timer = LoopTimer(loop: loop) { flood.firedAfter = flood.ran }
        }
        let mailbox = loop.mailbox
        @Sendable func step() {
            if flood.ran == 0 { flood.timer?.start(delayMilliseconds: 0) }
            let until = DispatchTime.now().uptimeNanoseconds + UInt64(eachMilliseconds * 1_000_000)
            while DispatchTime.now().uptimeNanoseconds < until {}
            flood.ran += 1
            if flood.ran < jobs { _ = mailbox.post(step); return }
            // A timer that has not fired by now never will.
            flood.timer?.close()
            mailbox.shutDown()
        }
        #expect(mailbox.post(step) == .accepted)
        #expect(loop.waitUntilStopped(seconds: 30))
        #expect(flood.ran == jobs)
        return (flood.firedAfter, mailbox.statistics.wakeups)
    }

    /// A flood of quick posts lets the loop's timers run after each `maxRoundsPerWakeup` (16)
    /// rounds: without that bound the 64 jobs run in one drain (well under its 10 ms), and the
    /// timer only after them.
    @Test func aFloodOfQuickPostsYieldsToTheLoopEverySixteenRounds() {
        let (firedAfter, wakeups) = flood(jobs: 64, eachMilliseconds: 0)
        #expect(firedAfter != nil && firedAfter! <= 16, "the timer fired after \(String(describing: firedAfter)) jobs")
        #expect(wakeups >= 4)
    }

    /// A flood of slow posts lets the loop's timers run once a drain has taken 10 ms
    /// (`maxNanosecondsPerWakeup`): three 4 ms jobs at most. Without that bound the 8 jobs run in
    /// one drain (fewer than 16 rounds), and the timer only after them.
    @Test func aFloodOfSlowPostsYieldsToTheLoopAfterTenMilliseconds() {
        let (firedAfter, _) = flood(jobs: 8, eachMilliseconds: 4)
        #expect(firedAfter != nil && firedAfter! <= 3, "the timer fired after \(String(describing: firedAfter)) jobs")
    }
}
