import CLibUV
import ReceptionistSync

/// One accepted TCP socket with a corked, bounded-by-policy outbound queue.
///
/// Bytes passed to `write` are queued and flushed by the loop once per iteration in a single
/// `uv_try_write` of all queued buffers (a writev), falling back to `uv_write` for whatever the
/// kernel did not take. The connection never frees itself inside its own write path: `close`
/// only marks it and asks libuv, and memory goes in `uv_close`'s callback.
///
/// Loop thread only.
public final class TCPConnection: LoopHandle, LoopFlushable {
    public enum State: Sendable, Equatable {
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

    // Every connection holds these: the one-byte fields first, where they fill what `LoopHandle`
    // leaves of its last word, and no optionals that would pad a word each.
    public private(set) var state: State = .open
    private var flushScheduled = false
    /// Waiting for the loop's write delay (`delaysWrites`); an urgent write still flushes now.
    private var delayedFlushScheduled = false
    private var closeWhenFlushed = false
    private var overHighWater = false
    /// The peer sent EOF: nothing is left to read out before closing.
    private var peerFinished = false
    /// A subscriber's stream: its writes may wait up to the loop's write delay, while the loop is
    /// busy writing, to leave with the ones after them (`WriteDelay`). Replies to requests never
    /// wait.
    public var delaysWrites = false
    /// Where the connection's owner keeps it (the gateway's connection table), or -1: the owner
    /// then needs no dictionary keyed by the connection.
    public var ownerSlot: Int32 = -1
    /// `highWaterBytes`, in half a word beside `ownerSlot`.
    private var highWater: Int32 = 256 * 1024

    public var delegate: (any TCPConnectionDelegate)?
    /// Past this many queued bytes `write` answers `.backpressure` (at most `Int32.max`).
    public var highWaterBytes: Int {
        get { Int(highWater) }
        set { highWater = Int32(clamping: newValue) }
    }
    /// When the connection entered `.lingering`, in loop milliseconds (meaningful only then).
    private var lingeringStart: UInt64 = 0

    private var pending = WriteQueue()
    private var pendingBytes = 0
    private var inFlight: WriteRequest?
    /// Bytes written since the last flush: they have not been offered to the kernel yet.
    private var unflushedBytes = 0

    /// When the connection entered `.lingering`, in loop milliseconds; nil in any other state.
    public var lingeringSince: UInt64? { state == .lingering ? lingeringStart : nil }

    /// Bytes accepted by `write` and not yet handed to the kernel.
    public var queuedBytes: Int { pendingBytes + (inFlight?.byteCount ?? 0) }

    /// Bytes the kernel has already refused: what is queued, less what was written since the last
    /// flush. A slow-client policy looks at this, not `queuedBytes`, so a burst written within one
    /// loop iteration (a replay, a batch) never counts against a client that reads promptly.
    public var backlogBytes: Int { queuedBytes - unflushedBytes }

    var stream: UnsafeMutablePointer<uv_stream_t> { raw.assumingMemoryBound(to: uv_stream_t.self) }
    var tcp: UnsafeMutablePointer<uv_tcp_t> { raw.assumingMemoryBound(to: uv_tcp_t.self) }

    init(loop: EventLoop) {
        super.init(loop: loop, type: UV_TCP)
        uv_tcp_init(loop.raw, tcp)
        adopt()
    }

    /// The peer's IP address as text, or nil if the socket has none.
    public lazy var peerAddress: String? = {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(tcp, $0, &length) }
        }
        guard status == 0 else { return nil }
        return SocketAddress.text(of: &storage)
    }()

    // MARK: Reading

    public func startReading() {
        guard state == .open || state == .lingering else { return }
        uv_read_start(
            stream,
            { handle, _, buffer in
                let loop = EventLoop.from(handle?.pointee.loop)!
                buffer!.pointee = uv_buf_init(
                    loop.readBuffer.assumingMemoryBound(to: CChar.self), UInt32(EventLoop.readBufferSize))
            },
            { handle, count, buffer in
                guard let connection = LoopHandle.owner(UnsafeMutableRawPointer(handle), as: TCPConnection.self)
                else { return }
                connection.didRead(count: count, base: buffer?.pointee.base)
            })
    }

    public func stopReading() {
        guard state == .open else { return }
        uv_read_stop(stream)
    }

    private func didRead(count: Int, base: UnsafeMutablePointer<CChar>?) {
        if count > 0 {
            loop.bytesRead &+= UInt64(count)
            guard state == .open else { return }  // lingering: discard until EOF
            delegate?.connection(self, didRead: UnsafeRawBufferPointer(start: base, count: count))
        } else if count == Int(UV_EOF.rawValue) {
            if state == .lingering {
                close()
            } else {
                uv_read_stop(stream)
                peerFinished = true
                delegate?.connectionDidReadEOF(self)
            }
        } else if count < 0 {
            close()
        }
    }

    // MARK: Writing

    /// Queues bytes; they go out before the loop next sleeps. Any number of writes in one iteration
    /// leave in one writev.
    @discardableResult
    public func write(_ bytes: SharedBytes) -> WriteResult {
        guard state == .open, !closeWhenFlushed else { return .dropped }
        let count = bytes.count
        guard count > 0 else { return .queued }
        pending.append((bytes, 0))
        pendingBytes += count
        unflushedBytes += count
        scheduleFlush()
        if queuedBytes > highWaterBytes {
            overHighWater = true
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
        if delayedFlushScheduled && !flushScheduled && state == .open {
            flushScheduled = true
            loop.scheduleFlush(self)
        }
        return result
    }

    /// Sends what is queued, then shuts down our side and lingers briefly to read out the peer, so
    /// a final response is not lost to a reset. The owner closes a connection that lingers too long.
    public func closeAfterFlush() {
        guard state == .open, !closeWhenFlushed else { return }
        closeWhenFlushed = true
        scheduleFlush()
    }

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        if delaysWrites && !closeWhenFlushed && loop.writeDelay.isActive {
            guard !delayedFlushScheduled else { return }
            delayedFlushScheduled = true
            loop.scheduleDelayedFlush(self)
        } else {
            flushScheduled = true
            loop.scheduleFlush(self)
        }
    }

    func flush() {
        flushScheduled = false
        delayedFlushScheduled = false
        unflushedBytes = 0
        guard state == .open else { return }
        if inFlight == nil && !pending.isEmpty {
            writePending()
        }
        if inFlight == nil && pending.isEmpty {
            didEmptyQueue()
        }
    }

    private func didEmptyQueue() {
        if closeWhenFlushed {
            if peerFinished { close() } else { shutDownWrites() }
        } else if overHighWater {
            overHighWater = false
            delegate?.connectionDidDrain(self)
        }
    }

    /// Tries the kernel directly with every queued buffer; whatever it does not take goes to `uv_write`.
    private func writePending() {
        let buffers = loop.writeScratch
        var index = 0
        let count = pending.forEachUnwritten(upTo: EventLoop.maxWriteBuffers) { base, length in
            buffers[index] = uv_buf_init(
                UnsafeMutableRawPointer(mutating: base).assumingMemoryBound(to: CChar.self), UInt32(length))
            index += 1
        }
        let written = uv_try_write(stream, buffers, UInt32(count))
        loop.writeDelay.noteWrite()
        if written < 0 && written != UV_EAGAIN.rawValue {
            close()
            return
        }
        consume(max(0, Int(written)))
        loop.bytesWritten &+= UInt64(max(0, Int(written)))
        guard !pending.isEmpty else { return }

        let request = WriteRequest(chunks: pending.prefix(EventLoop.maxWriteBuffers))
        pending.removeFirst(request.chunks.count)
        pendingBytes -= request.byteCount
        inFlight = request
        let status = request.submit(on: stream)
        if status < 0 {
            inFlight = nil
            close()
        }
    }

    private func consume(_ written: Int) {
        pendingBytes -= written
        pending.consume(written)
    }

    fileprivate func writeCompleted(status: Int32) {
        let request = inFlight
        inFlight = nil
        guard state == .open else { return }
        if status < 0 {
            close()
            return
        }
        loop.bytesWritten &+= UInt64(request?.byteCount ?? 0)
        // What was queued meanwhile leaves with the loop's flush, joined by whatever else this
        // iteration queues, rather than in a write of its own now.
        if pending.isEmpty {
            didEmptyQueue()
        } else {
            scheduleFlush()
        }
    }

    private func shutDownWrites() {
        state = .lingering
        lingeringStart = loop.nowMilliseconds
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        let status = uv_shutdown(request, stream) { request, _ in
            request?.deallocate()
        }
        if status < 0 {
            request.deallocate()
            close()
        }
    }

    // MARK: Closing

    override func willClose() {
        state = .closing
        pending.removeAll()
        pendingBytes = 0
        unflushedBytes = 0
    }

    override func didClose() {
        state = .closed
        let delegate = self.delegate
        self.delegate = nil
        delegate?.connectionDidClose(self)
    }
}

/// One `uv_write` in flight: it keeps its buffers alive until libuv's callback.
private final class WriteRequest {
    let chunks: [(bytes: SharedBytes, offset: Int)]
    let byteCount: Int
    private let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
    private let buffers: UnsafeMutablePointer<uv_buf_t>

    init(chunks: [(bytes: SharedBytes, offset: Int)]) {
        self.chunks = chunks
        byteCount = chunks.reduce(0) { $0 + $1.bytes.count - $1.offset }
        buffers = .allocate(capacity: chunks.count)
        for (i, chunk) in chunks.enumerated() {
            buffers[i] = uv_buf_init(
                (chunk.bytes.base + chunk.offset).assumingMemoryBound(to: CChar.self),
                UInt32(chunk.bytes.count - chunk.offset))
        }
    }

    deinit {
        request.deallocate()
        buffers.deallocate()
    }

    func submit(on stream: UnsafeMutablePointer<uv_stream_t>) -> Int32 {
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = uv_write(request, stream, buffers, UInt32(chunks.count)) { request, status in
            guard let request, let data = request.pointee.data else { return }
            // Release the request (and its buffers) only after telling the connection.
            let write = Unmanaged<WriteRequest>.fromOpaque(data).takeRetainedValue()
            request.pointee.data = nil
            if let connection = LoopHandle.owner(UnsafeMutableRawPointer(request.pointee.handle), as: TCPConnection.self) {
                connection.writeCompleted(status: status)
            }
            _ = write
        }
        if status < 0 {
            Unmanaged<WriteRequest>.fromOpaque(request.pointee.data!).release()
            request.pointee.data = nil
        }
        return status
    }
}
