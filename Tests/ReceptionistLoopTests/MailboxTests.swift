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
}
