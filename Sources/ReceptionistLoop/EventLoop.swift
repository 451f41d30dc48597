import CLibUV
import DequeModule
import Glibc

/// The single IO execution context: one libuv loop on one thread.
///
/// **Every socket, timer and session belongs to the loop thread; other threads reach it only through `mailbox`.**
///
/// Writes are corked: connections queue bytes during callbacks and the loop flushes each dirty
/// connection once per iteration (after IO and before the loop sleeps), so whatever a socket
/// sends in one iteration goes out in one writev.
///
/// Loop thread only, except `mailbox` and `isCurrent`, which any thread may use.
public final class EventLoop {
    let raw: UnsafeMutablePointer<uv_loop_t>
    private let owner: pthread_t
    /// The one thread-safe door into the loop.
    public let mailbox: Mailbox
    /// What the loop's owner shares with everything on the loop (the gateway's services), kept
    /// once here so that no connection needs a reference of its own to it.
    public var context: AnyObject?

    /// One read buffer shared by every connection on this loop.
    ///
    /// Invariant: a connection hands what it reads to its delegate, which consumes the bytes
    /// before returning, before it reads again, so one buffer serves every socket.
    let readBuffer: UnsafeMutableRawPointer
    static let readBufferSize = 64 * 1024

    /// Bytes read from and written to every socket on this loop, for metrics. Loop thread only.
    public internal(set) var bytesRead: UInt64 = 0
    public internal(set) var bytesWritten: UInt64 = 0

    private var dirty: [any LoopFlushable] = []
    /// Work that writes to connections (`IterationTask`): run before `dirty` is flushed, so that
    /// what it writes leaves in the same flush.
    private var beforeFlush: [any LoopFlushable] = []
    /// What one pass of `flushDirty` works through: the storage of `dirty` and `beforeFlush`,
    /// swapped in and cleared after, never copied, so that a pass allocates nothing (clearing a
    /// copied array keeping its capacity allocates a new one).
    private var flushing: [any LoopFlushable] = []
    /// Where a flush lays out a connection's buffers for `sendmsg` (which copies them into the
    /// kernel before it returns), so that a flush allocates nothing.
    let writeScratch = UnsafeMutablePointer<iovec>.allocate(capacity: EventLoop.maxWriteBuffers)
    /// IOV_MAX: the most buffers one writev takes.
    static let maxWriteBuffers = 1024
    private var flushHooks: FlushHooks?
    /// Whether subscribers' writes wait a little to leave together (see `WriteDelay`).
    public var writeDelay = WriteDelay(maxDelayMilliseconds: 0)
    /// Connections whose flush waits for `delayTimer`.
    private var delayed: [any LoopFlushable] = []
    private var delayTimer: LoopTimer?
    /// Connections whose delay is over, written a slice at a time, one slice per iteration after
    /// its IO: at most `delayedFlushSlices` slices, each of `minimumDelayedSlice` connections at
    /// least.
    ///
    /// A delayed flush to thousands of subscribers takes tens of milliseconds of writes; in one go
    /// it kept the loop from accepting, reading and answering for all of that time. In slices,
    /// what arrives meanwhile is read between them: a publisher's next messages join the queues
    /// still to be written, and new clients are answered. No connection waits longer than it did
    /// in one go, since the writes before it are the same ones. The slices are few, since each
    /// turn between them hands its messages to every subscriber of a topic in a walk of its own
    /// (invariant 47).
    private var delayedDue = Deque<any LoopFlushable>()
    private var delayedSlice = EventLoop.minimumDelayedSlice
    /// Nanoseconds the slices of the flush under way have written for (`WriteDelay.flushTook`).
    private var delayedWriting: UInt64 = 0
    static let minimumDelayedSlice = 128
    static let delayedFlushSlices = 8

    /// Creates a loop owned by the calling thread; `run` must be called on that same thread.
    public init() throws(LoopError) {
        raw = .allocate(capacity: 1)
        let status = uv_loop_init(raw)
        guard status == 0 else {
            raw.deallocate()
            throw LoopError(code: status, operation: "uv_loop_init")
        }
        owner = pthread_self()
        readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        mailbox = Mailbox(loop: raw)
        raw.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        flushHooks = FlushHooks(loop: self)
    }

    deinit {
        let status = uv_loop_close(raw)
        assert(status == 0, "the loop was released with open handles")
        raw.deallocate()
        readBuffer.deallocate()
        writeScratch.deallocate()
    }

    /// Whether the caller is on this loop's thread. Any thread.
    public var isCurrent: Bool { pthread_equal(pthread_self(), owner) != 0 }

    /// Milliseconds of the loop's monotonic clock, cached at the start of the iteration.
    public var nowMilliseconds: UInt64 { uv_now(raw) }

    /// Runs until no handle keeps the loop alive, then closes the loop's own handles.
    public func run() {
        precondition(isCurrent, "run the loop on the thread that created it")
        uv_run(raw, UV_RUN_DEFAULT)
        flushHooks?.close()
        flushHooks = nil
        delayTimer?.close()
        delayTimer = nil
        mailbox.close()
        // Every handle that keeps the loop alive is closed by now; one that does not (a delayed
        // job's one-shot timer) may still be open, and its work goes with the loop.
        uv_walk(raw, { handle, _ in
            guard let handle, uv_is_closing(handle) == 0 else { return }
            LoopHandle.owner(UnsafeMutableRawPointer(handle), as: LoopHandle.self)?.close()
        }, nil)
        // Let libuv deliver the close callbacks so every handle's memory is released.
        uv_run(raw, UV_RUN_DEFAULT)
    }

    /// Queues `target` to be flushed before the loop next sleeps.
    func scheduleFlush(_ target: any LoopFlushable) {
        dirty.append(target)
    }

    /// Queues `task` to run at the end of this iteration, before the connections flush.
    func scheduleBeforeFlush(_ task: any LoopFlushable) {
        beforeFlush.append(task)
    }

    /// Queues `target` to be flushed when the write delay is over (`writeDelay.isActive`).
    func scheduleDelayedFlush(_ target: any LoopFlushable) {
        delayed.append(target)
        let now = nowMilliseconds
        guard let due = writeDelay.wait(now: now) else { return }
        if delayTimer == nil {
            delayTimer = LoopTimer(loop: self) { [unowned self] in self.flushDelayed() }
        }
        delayTimer?.start(delayMilliseconds: due - now)
    }

    /// The delay is over: its connections are due, and written from this iteration's check on.
    /// A connection that waits again from now on (one written already that gets more frames)
    /// sets the next flush, with the delay as it was.
    private func flushDelayed() {
        writeDelay.flushed()
        delayedDue.append(contentsOf: delayed)
        delayed.removeAll(keepingCapacity: true)
        let slices = Self.delayedFlushSlices
        delayedSlice = max(Self.minimumDelayedSlice, (delayedDue.count + slices - 1) / slices)
    }

    /// Writes the next slice of the connections due. Once none is left, the next wait lasts as
    /// long as their writes took (`WriteDelay`).
    private func flushDelayedSlice() {
        let start = uv_hrtime()
        for _ in 0..<min(delayedSlice, delayedDue.count) {
            delayedDue.removeFirst().flush()
        }
        delayedWriting += uv_hrtime() - start
        if delayedDue.isEmpty {
            writeDelay.flushTook(nanoseconds: delayedWriting)
            delayedWriting = 0
        }
    }

    /// Before polling: writes queued since the last flush (by timers) must not wait for the poll
    /// to end, so the poll is told not to block; they are flushed after it, with whatever the IO
    /// it finds adds (once per connection per iteration, not once before and once after).
    fileprivate func beforePoll() {
        if dirty.isEmpty && beforeFlush.isEmpty && delayedDue.isEmpty {
            flushHooks?.pollMayBlock(true)
        } else {
            flushHooks?.pollMayBlock(false)
        }
    }

    fileprivate func flushDirty() {
        writeDelay.tick(now: nowMilliseconds)
        while !dirty.isEmpty || !beforeFlush.isEmpty {
            // Work that writes first, then the connections it wrote to: each flushes once.
            if !beforeFlush.isEmpty {
                swap(&beforeFlush, &flushing)
            } else {
                swap(&dirty, &flushing)
            }
            for target in flushing {
                target.flush()
            }
            flushing.removeAll(keepingCapacity: true)
        }
        if !delayedDue.isEmpty {
            flushDelayedSlice()
        }
    }

    /// The loop's flush: a check handle flushes dirty connections once per iteration, after IO;
    /// a prepare handle, before the poll, keeps an idle handle running (which makes the poll not
    /// block) while connections are dirty, so writes made by timers leave in the same iteration.
    /// None of them keeps the loop alive.
    private final class FlushHooks {
        let prepare: UnsafeMutablePointer<uv_prepare_t> = .allocate(capacity: 1)
        let check: UnsafeMutablePointer<uv_check_t> = .allocate(capacity: 1)
        let idle: UnsafeMutablePointer<uv_idle_t> = .allocate(capacity: 1)
        private var idling = false

        init(loop: EventLoop) {
            uv_prepare_init(loop.raw, prepare)
            uv_check_init(loop.raw, check)
            uv_idle_init(loop.raw, idle)
            uv_prepare_start(prepare) { handle in
                EventLoop.from(handle?.pointee.loop)?.beforePoll()
            }
            uv_check_start(check) { handle in
                EventLoop.from(handle?.pointee.loop)?.flushDirty()
            }
            uv_unref(UnsafeMutablePointer<uv_handle_t>(OpaquePointer(prepare)))
            uv_unref(UnsafeMutablePointer<uv_handle_t>(OpaquePointer(check)))
            uv_unref(UnsafeMutablePointer<uv_handle_t>(OpaquePointer(idle)))
        }

        /// An active idle handle makes libuv poll with a zero timeout.
        func pollMayBlock(_ mayBlock: Bool) {
            guard idling == mayBlock else { return }
            idling = !mayBlock
            if mayBlock {
                uv_idle_stop(idle)
            } else {
                uv_idle_start(idle) { _ in }
            }
        }

        func close() {
            uv_close(UnsafeMutablePointer<uv_handle_t>(OpaquePointer(prepare))) { handle in
                UnsafeMutableRawPointer(handle)?.deallocate()
            }
            uv_close(UnsafeMutablePointer<uv_handle_t>(OpaquePointer(check))) { handle in
                UnsafeMutableRawPointer(handle)?.deallocate()
            }
            uv_close(UnsafeMutablePointer<uv_handle_t>(OpaquePointer(idle))) { handle in
                UnsafeMutableRawPointer(handle)?.deallocate()
            }
        }
    }

    static func from(_ loop: UnsafeMutablePointer<uv_loop_t>?) -> EventLoop? {
        guard let data = loop?.pointee.data else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue()
    }
}

/// Something with bytes to write at the end of a loop iteration.
protocol LoopFlushable: AnyObject {
    func flush()
}
