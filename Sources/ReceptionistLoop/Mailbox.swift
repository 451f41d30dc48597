import CLibUV
import ReceptionistSync


/// The one thread-safe door into the loop: a lock-guarded queue of closures plus `uv_async_send`.
///
/// Invariants:
/// - The loop is signalled only when pending work goes from none to some. Work counts as pending
///   from the first post until a drain finds the queue empty, so posts that arrive while the loop
///   is already draining just append and are picked up by the same drain.
/// - A drain takes at most `maxRoundsPerWakeup` batches, then re-signals itself, so a flood of
///   posts never starves the loop's IO.
/// - Closures run on the loop thread, in post order (so in order per posting thread), each once.
/// - After `close` every post is refused and says so; every post accepted before it still runs.
///
/// Any thread may `post`; `close` and the drain run on the loop thread.
public final class Mailbox: Sendable {
    public typealias Job = @Sendable () -> Void

    public enum PostResult: Sendable, Equatable {
        case accepted
        /// The loop has shut down; the closure will never run.
        case refused
    }

    public struct Statistics: Sendable, Equatable {
        /// Closures accepted.
        public var posts: Int
        /// `uv_async_send` calls: one per empty-to-non-empty transition.
        public var signals: Int
        /// Batches drained on the loop.
        public var wakeups: Int
        /// Closures waiting now.
        public var depth: Int
    }

    private struct State {
        var jobs: [Job] = []
        var closed = false
        /// A wake-up is on its way or a drain is running.
        var signalled = false
        var posts = 0
        var signals = 0
        var wakeups = 0
        /// A drain is running, and `close` was called from one of its jobs: the drain runs what
        /// is left, in post order, then closes.
        var draining = false
        var closeAfterDrain = false
    }

    private let state = PThreadLock(State())
    // Why this is safe to share: the handle is only passed to `uv_async_send`, which libuv documents
    // as thread-safe, and only while `closed` is false under the lock; `close` sets `closed` under
    // the same lock before it closes the handle, so no sender can reach a closing handle.
    nonisolated(unsafe) private let async: UnsafeMutablePointer<uv_async_t>

    init(loop: UnsafeMutablePointer<uv_loop_t>) {
        async = .allocate(capacity: 1)
        uv_async_init(loop, async) { handle in
            guard let data = handle?.pointee.data else { return }
            Unmanaged<Mailbox>.fromOpaque(data).takeUnretainedValue().drain()
        }
        async.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Queues `job` to run on the loop thread. Any thread.
    public func post(_ job: @escaping Job) -> PostResult {
        state.withLock { state in
            if state.closed { return .refused }
            state.jobs.append(job)
            state.posts += 1
            if !state.signalled {
                state.signalled = true
                state.signals += 1
                uv_async_send(async)
            }
            return .accepted
        }
    }

    /// Any thread.
    public var statistics: Statistics {
        state.withLock { Statistics(posts: $0.posts, signals: $0.signals, wakeups: $0.wakeups, depth: $0.jobs.count) }
    }

    /// Any thread.
    public var isClosed: Bool { state.withLock { $0.closed } }

    static let maxRoundsPerWakeup = 16
    /// A drain that has run this long lets the loop poll before it takes the next round, so a
    /// flood of posts (a job committing flat out) never keeps signals, timers and sockets waiting
    /// for longer than one round.
    static let maxNanosecondsPerWakeup: UInt64 = 10_000_000

    private func drain() {
        var batch: [Job] = []
        var counted = false
        let start = uv_hrtime()
        state.withLock { $0.draining = true }
        defer {
            let closing = state.withLock { state in
                state.draining = false
                return state.closeAfterDrain
            }
            if closing { close() }
        }
        for _ in 0..<Self.maxRoundsPerWakeup {
            if counted && uv_hrtime() &- start > Self.maxNanosecondsPerWakeup { break }
            let more = state.withLock { state in
                swap(&batch, &state.jobs)
                if batch.isEmpty {
                    state.signalled = false
                    return false
                }
                if !counted { state.wakeups += 1 }
                return true
            }
            guard more else { return }
            counted = true
            for job in batch {
                job()
            }
            batch.removeAll(keepingCapacity: true)
        }
        // Still busy: come back on the next iteration so IO gets its turn.
        state.withLock { state in
            if !state.closed {
                state.signals += 1
                uv_async_send(async)
            }
        }
    }

    /// Refuses further posts, runs every accepted one, then releases the handle. Loop thread only; idempotent.
    func close() {
        var rest: [Job] = []
        let (first, inDrain) = state.withLock { state in
            defer { state.closed = true }
            // From a job of a drain: the rest of its batch was posted first, and runs first.
            if state.draining {
                if !state.closed { state.closeAfterDrain = true }
                return (false, true)
            }
            swap(&rest, &state.jobs)
            defer { state.closeAfterDrain = false }
            return (!state.closed || state.closeAfterDrain, false)
        }
        if inDrain { return }
        for job in rest {
            job()
        }
        guard first else { return }
        uv_close(UnsafeMutablePointer<uv_handle_t>(OpaquePointer(async))) { handle in
            guard let handle else { return }
            if let data = handle.pointee.data {
                Unmanaged<Mailbox>.fromOpaque(data).release()
            }
            handle.pointee.data = nil
            UnsafeMutableRawPointer(handle).deallocate()
        }
    }

    /// Shuts the door: called by the owner of the loop when it stops serving. Loop thread only.
    public func shutDown() {
        close()
    }
}
