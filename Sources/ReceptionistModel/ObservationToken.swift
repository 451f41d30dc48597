import ReceptionistSync

/// Keeps an observation alive. Cancel it, or let it go, to end the observation.
///
/// Once `cancel` returns, the observer is never called again: if a call is running on another
/// thread, `cancel` waits for it to finish. Cancelling from inside the observer's own call is fine.
public final class ObservationToken: Sendable {
    private let action: PThreadLock<(@Sendable () -> Void)?>

    init(_ cancel: @escaping @Sendable () -> Void) {
        action = PThreadLock(cancel)
    }

    /// Any thread. Idempotent.
    public func cancel() {
        let run = action.withLock { action in
            defer { action = nil }
            return action
        }
        run?()
    }

    deinit {
        cancel()
    }
}
