import Glibc

/// Starts a joinable POSIX thread running `body`.
///
/// Threads are created here rather than through Foundation so the modules that need them stay
/// free of Foundation.
public struct WorkerThread: Sendable {
    private let thread: pthread_t

    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    public static func start(_ body: @escaping @Sendable () -> Void) -> WorkerThread {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let status = pthread_create(&thread, nil, { context in
            let box = Unmanaged<Box>.fromOpaque(context!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        precondition(status == 0, "pthread_create failed: \(status)")
        return WorkerThread(thread: thread)
    }

    /// Waits for the thread to finish.
    public func join() {
        pthread_join(thread, nil)
    }

    /// Lets the thread end on its own: nobody will join it, and its resources go when it ends.
    /// For a thread that finishes by itself (a shutdown's waiter, a worker told to stop).
    public func detach() {
        pthread_detach(thread)
    }
}
