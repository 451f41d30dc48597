import CLibUV
import Glibc
import ReceptionistSync

/// One TCP socket with a corked, bounded-by-policy outbound queue.
///
/// libuv only watches the descriptor (a `uv_poll_t`); reads and writes are ours (`Socket`). Bytes
/// passed to `write` are queued and flushed by the loop once per iteration in one `sendmsg` of all
/// queued buffers (a writev); what the kernel does not take waits for the socket to turn writable.
/// The connection never frees itself inside its own write path: `close` only marks it and asks
/// libuv, and memory goes in `uv_close`'s callback.
///
/// Loop thread only.
public final class TCPConnection: LoopHandle, LoopFlushable {
    public enum State: UInt8, Sendable, Equatable {
        /// Reading and writing.
        case open
        /// Our side is shut down after the last byte; reads are discarded until EOF or `close`.
        case lingering
        /// `uv_close` was called.
        case closing
        case closed
    }

    /// What became of a `write`.
    public enum WriteResult: Sendable, Equatable {
        case queued
        /// Queued, but the queue is past `highWaterBytes`: the caller should apply its policy.
        case backpressure
        /// The connection is closing; the bytes were dropped.
        case dropped
    }

    /// A connection's yes-or-no facts, in one byte.
    struct Flags: OptionSet {
        let rawValue: UInt8
        static let flushScheduled = Flags(rawValue: 1 << 0)
        /// Waiting for the loop's write delay (`delaysWrites`); an urgent write still flushes now.
        static let delayedFlushScheduled = Flags(rawValue: 1 << 1)
        static let closeWhenFlushed = Flags(rawValue: 1 << 2)
        static let overHighWater = Flags(rawValue: 1 << 3)
        /// The peer sent EOF: nothing is left to read out before closing.
        static let peerFinished = Flags(rawValue: 1 << 4)
        static let delaysWrites = Flags(rawValue: 1 << 5)
        /// The owner wants reads: the poll watches for readability.
        static let reading = Flags(rawValue: 1 << 6)
        /// The kernel refused part of the queue: the poll watches for writability.
        static let awaitingWritable = Flags(rawValue: 1 << 7)
    }

    // Every connection holds these: the one-byte fields first, where they fill what `LoopHandle`
    // leaves of its last word, and no optionals that would pad a word each.
    public private(set) var state: State = .open
    private(set) var flags: Flags = []
    /// Where the connection's owner keeps it (the gateway's connection table), or -1: the owner
    /// then needs no dictionary keyed by the connection.
    public var ownerSlot: Int32 = -1
    /// `highWaterBytes`, in half a word beside `ownerSlot`.
    private var highWater: Int32 = 256 * 1024
    /// When the connection entered `.lingering`: the loop's milliseconds, cut to half a word, which
    /// fills the word `highWater` starts. A linger is measured by wrapping subtraction, right for
    /// any linger shorter than 49 days.
    private var lingeringStart: UInt32 = 0

    public var delegate: (any TCPConnectionDelegate)?
    /// Past this many queued bytes `write` answers `.backpressure` (at most `Int32.max`).
    public var highWaterBytes: Int {
        get { Int(highWater) }
        set { highWater = Int32(clamping: newValue) }
    }
    /// A subscriber's stream: its writes may wait up to the loop's write delay, while the loop is
    /// busy writing, to leave with the ones after them (`WriteDelay`). Replies to requests never
    /// wait.
    public var delaysWrites: Bool {
        get { flags.contains(.delaysWrites) }
        set { if newValue { flags.insert(.delaysWrites) } else { flags.remove(.delaysWrites) } }
    }

    private var pending = WriteQueue()
    private var pendingBytes = 0
    /// Bytes written since the last flush: they have not been offered to the kernel yet.
    private var unflushedBytes = 0

    /// How long the connection has been `.lingering` at `now` (loop milliseconds); nil in any
    /// other state.
    public func lingeredMilliseconds(now: UInt64) -> UInt64? {
        guard state == .lingering else { return nil }
        return UInt64(UInt32(truncatingIfNeeded: now) &- lingeringStart)
    }

    /// Bytes accepted by `write` and not yet taken by the kernel.
    public var queuedBytes: Int { pendingBytes }
    /// A write answered `.backpressure`, and the queue has not emptied since (`connectionDidDrain`
    /// comes when it does).
    public var isOverHighWater: Bool { flags.contains(.overHighWater) }

    /// The peer shut its side down (EOF read): nothing more will come, though it may still read.
    public var peerFinished: Bool { flags.contains(.peerFinished) }

    /// Bytes written and not yet taken by the peer: queued here, and held by the kernel until
    /// the peer acknowledges them. One system call.
    public var unsentBytes: Int { pendingBytes + Socket.unsentBytes(fileDescriptor) }

    /// `closeAfterFlush` was asked for, and what is queued has not all gone yet.
    public var closesWhenFlushed: Bool { flags.contains(.closeWhenFlushed) }

    /// Bytes the kernel has already refused: what is queued, less what was written since the last
    /// flush. A slow-client policy looks at this, not `queuedBytes`, so a burst written within one
    /// loop iteration (a replay, a batch) never counts against a client that reads promptly.
    public var backlogBytes: Int { queuedBytes - unflushedBytes }

    /// Takes over `fd`, a connected non-blocking socket: from here on the connection closes it.
    /// Nil (and `fd` closed) if libuv cannot watch it.
    init?(loop: EventLoop, fd: Int32) {
        super.init(loop: loop, type: UV_POLL)
        guard adoptPoll(of: fd) == 0 else { return nil }
        // Small frames, requests and replies go out at once, accepted or connected alike.
        Socket.setNoDelay(fd)
    }

    /// The peer's IP address as text, or nil if the socket has none.
    public lazy var peerAddress: String? = {
        guard var storage = Socket.peerAddress(fileDescriptor) else { return nil }
        return SocketAddress.text(of: &storage)
    }()

    // MARK: Watching the descriptor

    /// Tells the poll what to watch for: readability while the owner reads, writability while
    /// the kernel holds back part of the queue. Called only when one of the two changes, since
    /// each change is an epoll call.
    private func watch() {
        var events: Int32 = 0
        if flags.contains(.reading) { events |= Int32(UV_READABLE.rawValue) }
        if flags.contains(.awaitingWritable) { events |= Int32(UV_WRITABLE.rawValue) }
        if events == 0 {
            uv_poll_stop(poll)
        } else if uv_poll_start(poll, events, Self.pollCallback) < 0 {
            close()
        }
    }

    private static let pollCallback: uv_poll_cb = { handle, status, events in
        guard let connection = LoopHandle.owner(UnsafeMutableRawPointer(handle), as: TCPConnection.self) else { return }
        connection.didPoll(status: status, events: events)
    }

    private func didPoll(status: Int32, events: Int32) {
        guard status >= 0 else {
            close()
            return
        }
        if events & Int32(UV_READABLE.rawValue) != 0 {
            readAvailable()
        }
        if events & Int32(UV_WRITABLE.rawValue) != 0 && flags.contains(.awaitingWritable) && state == .open {
            writePending()
            // A write that failed closed the connection: nothing drained.
            if state == .open && pending.isEmpty { didEmptyQueue() }
        }
    }

    // MARK: Reading

    /// Watches for bytes; after the peer's EOF there are none, so reading does not start again.
    public func startReading() {
        guard state == .open || state == .lingering, !flags.contains(.reading), !flags.contains(.peerFinished) else { return }
        flags.insert(.reading)
        watch()
    }

    public func stopReading() {
        guard state == .open, flags.contains(.reading) else { return }
        flags.remove(.reading)
        watch()
    }

    /// As many reads as the socket has ready, up to a bound so one busy peer cannot hold the loop;
    /// the poll is level-triggered, so what is left is read in the next iteration.
    private func readAvailable() {
        let buffer = loop.readBuffer
        let fd = fileDescriptor
        for _ in 0..<Self.readsPerWake {
            guard flags.contains(.reading), state == .open || state == .lingering else { return }
            let count = Socket.receive(fd, into: buffer, count: EventLoop.readBufferSize)
            if count > 0 {
                loop.bytesRead &+= UInt64(count)
                // Lingering: discard until EOF.
                if state == .open {
                    delegate?.connection(self, didRead: UnsafeRawBufferPointer(start: buffer, count: count))
                }
                guard count == EventLoop.readBufferSize else { return }
            } else if count == 0 {
                didReadEOF()
                return
            } else {
                if count != -Int(EAGAIN) && count != -Int(EWOULDBLOCK) { close() }
                return
            }
        }
    }

    /// libuv's own bound for a stream.
    private static let readsPerWake = 32

    private func didReadEOF() {
        if state == .lingering {
            close()
        } else {
            flags.remove(.reading)
            watch()
            flags.insert(.peerFinished)
            delegate?.connectionDidReadEOF(self)
        }
    }

    // MARK: Writing

    /// Queues bytes; they go out before the loop next sleeps. Any number of writes in one iteration
    /// leave in one writev.
    @discardableResult
    public func write(_ bytes: SharedBytes) -> WriteResult {
        guard state == .open, !flags.contains(.closeWhenFlushed) else { return .dropped }
        let count = bytes.count
        guard count > 0 else { return .queued }
        pending.append((bytes, 0))
        pendingBytes += count
        unflushedBytes += count
        scheduleFlush()
        if queuedBytes > highWaterBytes {
            flags.insert(.overHighWater)
            return .backpressure
        }
        return .queued
    }

    @discardableResult
    public func write(_ bytes: [UInt8]) -> WriteResult {
        write(SharedBytes(bytes))
    }

    /// Queues bytes that answer what the peer sent (a reply, an acknowledgement): they go before
    /// the loop next sleeps even on a connection whose writes may wait, since a peer that waits
    /// for the answer would otherwise wait for the delay too.
    @discardableResult
    public func writeNow(_ bytes: [UInt8]) -> WriteResult {
        let result = write(SharedBytes(bytes))
        if flags.contains(.delayedFlushScheduled) && !flags.contains(.flushScheduled) && state == .open {
            flags.insert(.flushScheduled)
            loop.scheduleFlush(self)
        }
        return result
    }

    /// Sends what is queued, then shuts down our side and lingers briefly to read out the peer, so
    /// a final response is not lost to a reset. The owner closes a connection that lingers too long.
    public func closeAfterFlush() {
        guard state == .open, !flags.contains(.closeWhenFlushed) else { return }
        flags.insert(.closeWhenFlushed)
        scheduleFlush()
    }

    private func scheduleFlush() {
        guard !flags.contains(.flushScheduled) else { return }
        if flags.contains(.delaysWrites) && !flags.contains(.closeWhenFlushed) && loop.writeDelay.isActive {
            guard !flags.contains(.delayedFlushScheduled) else { return }
            flags.insert(.delayedFlushScheduled)
            loop.scheduleDelayedFlush(self)
        } else {
            flags.insert(.flushScheduled)
            loop.scheduleFlush(self)
        }
    }

    func flush() {
        flags.remove([.flushScheduled, .delayedFlushScheduled])
        unflushedBytes = 0
        guard state == .open else { return }
        // A socket the kernel is holding back is written when the poll says it is writable.
        if !flags.contains(.awaitingWritable) && !pending.isEmpty {
            writePending()
        }
        if state == .open && pending.isEmpty {
            didEmptyQueue()
        }
    }

    private func didEmptyQueue() {
        if flags.contains(.closeWhenFlushed) {
            if flags.contains(.peerFinished) { close() } else { shutDownWrites() }
        } else if flags.contains(.overHighWater) {
            flags.remove(.overHighWater)
            delegate?.connectionDidDrain(self)
        }
    }

    /// Offers the kernel every queued buffer, up to a writev's worth at a time, until it takes
    /// them all or holds some back; then watches for writability if it held some back, and stops
    /// watching if it took everything.
    private func writePending() {
        let vectors = loop.writeScratch
        let fd = fileDescriptor
        while !pending.isEmpty {
            var count = 0
            var offered = 0
            _ = pending.forEachUnwritten(upTo: EventLoop.maxWriteBuffers) { base, length in
                vectors[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: length)
                count += 1
                offered += length
            }
            let written = Socket.send(fd, vectors, count: count)
            loop.writeDelay.noteWrite()
            if written < 0 && written != -Int(EAGAIN) && written != -Int(EWOULDBLOCK) {
                close()
                return
            }
            let taken = max(0, written)
            pendingBytes -= taken
            pending.consume(taken)
            loop.bytesWritten &+= UInt64(taken)
            guard taken == offered else { break }
        }
        let blocked = !pending.isEmpty
        if blocked != flags.contains(.awaitingWritable) {
            if blocked { flags.insert(.awaitingWritable) } else { flags.remove(.awaitingWritable) }
            watch()
        }
    }

    private func shutDownWrites() {
        state = .lingering
        lingeringStart = UInt32(truncatingIfNeeded: loop.nowMilliseconds)
        if Socket.shutDownWrites(fileDescriptor) < 0 {
            close()
            return
        }
        // What the peer sends is read out and dropped, even where the owner had stopped reading:
        // bytes left unread at the close would reset the connection, and the kernel would throw
        // away the end of the reply still on its way.
        startReading()
    }

    // MARK: Closing

    override func willClose() {
        state = .closing
        pending.removeAll()
        pendingBytes = 0
        unflushedBytes = 0
        // The poll stops watching before the descriptor goes, as libuv asks; `uv_close` follows.
        let fd = fileDescriptor
        uv_poll_stop(poll)
        if fd >= 0 { Socket.close(fd) }
    }

    override func didClose() {
        state = .closed
        let delegate = self.delegate
        self.delegate = nil
        delegate?.connectionDidClose(self)
    }
}
