import Glibc

/// A plain `pthread_mutex_t` guarding a value.
///
/// The standard library's `Mutex` uses priority-inheritance futexes on Linux, which enter the
/// kernel on every contended acquire; under many posting threads that cost dominates. A default
/// (non-PI) pthread mutex spins briefly and stays in user space for short critical sections.
///
/// Why `@unchecked Sendable` is safe: `value` is only reached through `withLock`, which holds the mutex.
public final class PThreadLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
