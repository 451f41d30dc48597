import Glibc

/// Carries a value that belongs to one thread through a `@Sendable` closure, and checks that it
/// is only opened on that thread.
///
/// The loop module's `LoopBound` is this type created on the loop thread; the push core uses it
/// for whatever thread its execution context delivers on, without knowing that it is a loop.
///
/// Why `@unchecked Sendable` is safe: the value is read only through `value`, which traps unless
/// the caller is on the thread that created the box, so the value is never touched by two threads.
public struct ThreadBound<Value>: @unchecked Sendable {
    private let boxed: Value
    private let thread: pthread_t

    /// Binds `value` to the calling thread.
    public init(_ value: Value) {
        boxed = value
        thread = pthread_self()
    }

    /// The creating thread only.
    public var value: Value {
        precondition(pthread_equal(pthread_self(), thread) != 0, "a thread-bound value was opened off its thread")
        return boxed
    }
}
