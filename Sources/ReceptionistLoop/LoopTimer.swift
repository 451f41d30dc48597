import CLibUV

/// A libuv timer that calls `callback` on the loop thread.
///
/// Loop thread only.
public final class LoopTimer: LoopHandle {
    private var callback: (() -> Void)?

    var timer: UnsafeMutablePointer<uv_timer_t> { raw.assumingMemoryBound(to: uv_timer_t.self) }

    public init(loop: EventLoop, callback: @escaping () -> Void) {
        self.callback = callback
        super.init(loop: loop, type: UV_TIMER)
        uv_timer_init(loop.raw, timer)
        adopt()
    }

    /// Fires after `delayMilliseconds`, then every `repeatMilliseconds` if that is not zero.
    public func start(delayMilliseconds: UInt64, repeatMilliseconds: UInt64 = 0) {
        guard !isClosing else { return }
        uv_timer_start(
            timer,
            { handle in
                LoopHandle.owner(UnsafeMutableRawPointer(handle), as: LoopTimer.self)?.callback?()
            }, delayMilliseconds, repeatMilliseconds)
    }

    public func stop() {
        guard !isClosing else { return }
        uv_timer_stop(timer)
    }

    override func didClose() {
        // Break the cycle the closure may hold back to the timer's owner.
        callback = nil
    }
}
