import Glibc

/// A pthread mutex with one condition variable, guarding a value.
///
/// Why `@unchecked Sendable` is safe: `value` is only reached inside `withLock` or `wait`, both of
/// which hold the mutex.
public final class ConditionLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
    private let condition: UnsafeMutablePointer<pthread_cond_t> = .allocate(capacity: 1)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Waits, with the lock held around `until`, until it returns true. Returns what `body` returns.
    public func wait<R>(until ready: (inout Value) -> Bool, then body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(&value) {
            pthread_cond_wait(condition, mutex)
        }
        return try body(&value)
    }

    /// Like `wait`, but gives up after `seconds`; `body` learns whether `ready` held.
    public func wait<R>(
        seconds: Double, until ready: (inout Value) -> Bool, then body: (inout Value, Bool) throws -> R
    ) rethrows -> R {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanos = Int(deadline.tv_nsec) + Int(seconds * 1_000_000_000)
        deadline.tv_sec += nanos / 1_000_000_000
        deadline.tv_nsec = nanos % 1_000_000_000
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var satisfied = ready(&value)
        while !satisfied {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT {
                satisfied = ready(&value)
                break
            }
            satisfied = ready(&value)
        }
        return try body(&value, satisfied)
    }

    /// Wakes every waiter so it re-checks its condition. Call after changing the value.
    public func broadcast() {
        pthread_cond_broadcast(condition)
    }
}
