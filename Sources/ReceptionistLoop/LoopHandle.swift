import CLibUV

/// The owner of one libuv handle, and the one place its close lifecycle is enforced.
///
/// Invariant: the handle's `data` holds a retained reference to this owner from `init` until
/// `uv_close`'s callback; only then is the reference released, `data` poisoned to nil and the
/// handle's memory freed. So no callback can ever reach a freed owner, and memory is never
/// released before libuv is done with it.
///
/// Loop thread only.
public class LoopHandle {
    /// Not counted: a handle is reached on every write and every callback, and a counted
    /// reference (strong or `unowned`) costs atomic operations on each of those reaches, the
    /// largest single cost of a fan-out in user space. Safe because the loop outlives every handle
    /// made on it: its `deinit` asserts that no handle is left open, and a handle is only used
    /// from the loop's own thread, inside `run`.
    public unowned(unsafe) let loop: EventLoop
    let raw: UnsafeMutableRawPointer
    public private(set) var isClosing = false

    var uvHandle: UnsafeMutablePointer<uv_handle_t> { raw.assumingMemoryBound(to: uv_handle_t.self) }

    /// The descriptor a poll handle watches, or -1 once it is closing. Asked of libuv rather than
    /// kept: every connection would carry the copy.
    var fileDescriptor: Int32 {
        var fd: uv_os_fd_t = -1
        return uv_fileno(uvHandle, &fd) == 0 ? fd : -1
    }

    init(loop: EventLoop, type: uv_handle_type) {
        precondition(loop.isCurrent, "libuv handles are created on the loop thread")
        self.loop = loop
        raw = UnsafeMutableRawPointer.allocate(byteCount: uv_handle_size(type), alignment: 16)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: uv_handle_size(type))
    }

    /// Call once the handle is initialised by libuv: from then on it must be closed to be freed.
    func adopt() {
        uvHandle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// The handle as a `uv_poll_t`, for the handles made with `UV_POLL`.
    var poll: UnsafeMutablePointer<uv_poll_t> { raw.assumingMemoryBound(to: uv_poll_t.self) }

    /// Makes this `UV_POLL` handle watch the socket `fd` and adopts it. If libuv cannot, `fd` is
    /// closed and the handle's memory freed; returns libuv's error then, else 0.
    func adoptPoll(of fd: Int32) -> Int32 {
        let status = uv_poll_init_socket(loop.raw, poll, fd)
        guard status == 0 else {
            Socket.close(fd)
            discard()
            return status
        }
        adopt()
        return 0
    }

    /// For a handle whose libuv init failed: nothing to close, just free.
    func discard() {
        raw.deallocate()
    }

    /// Starts closing the handle. Idempotent. `didClose` runs later, from libuv's close callback.
    public func close() {
        precondition(loop.isCurrent)
        guard !isClosing else { return }
        isClosing = true
        willClose()
        uv_close(uvHandle) { handle in
            guard let handle, let data = handle.pointee.data else { return }
            let owner = Unmanaged<LoopHandle>.fromOpaque(data).takeRetainedValue()
            handle.pointee.data = nil
            owner.didClose()
            UnsafeMutableRawPointer(handle).deallocate()
        }
    }

    /// Whether the handle keeps the loop alive.
    public func setKeepsLoopAlive(_ alive: Bool) {
        if alive { uv_ref(uvHandle) } else { uv_unref(uvHandle) }
    }

    /// Subclasses stop their watchers here; runs just before `uv_close`.
    func willClose() {}

    /// Subclasses release their resources here; runs inside libuv's close callback.
    func didClose() {}

    static func owner<T: LoopHandle>(_ handle: UnsafeMutableRawPointer?, as: T.Type) -> T? {
        guard let data = handle?.assumingMemoryBound(to: uv_handle_t.self).pointee.data else { return nil }
        return Unmanaged<LoopHandle>.fromOpaque(data).takeUnretainedValue() as? T
    }
}
