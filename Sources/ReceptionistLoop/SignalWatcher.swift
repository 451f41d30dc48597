import CLibUV

/// Delivers a POSIX signal to the loop thread as an ordinary callback.
///
/// Loop thread only.
public final class SignalWatcher: LoopHandle {
    private var callback: ((Int32) -> Void)?

    var signal: UnsafeMutablePointer<uv_signal_t> { raw.assumingMemoryBound(to: uv_signal_t.self) }

    public init(loop: EventLoop, signal number: Int32, callback: @escaping (Int32) -> Void) throws(LoopError) {
        self.callback = callback
        super.init(loop: loop, type: UV_SIGNAL)
        uv_signal_init(loop.raw, signal)
        adopt()
        let status = uv_signal_start(
            signal,
            { handle, number in
                LoopHandle.owner(UnsafeMutableRawPointer(handle), as: SignalWatcher.self)?.callback?(number)
            }, number)
        if status < 0 {
            close()
            throw LoopError(code: status, operation: "watch signal \(number)")
        }
    }

    override func didClose() {
        callback = nil
    }
}
