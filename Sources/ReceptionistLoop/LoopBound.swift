import Glibc

/// Carries a loop-thread value through a `@Sendable` closure, and checks it is only opened on that thread.
///
/// Why `@unchecked Sendable` is safe: the value is read only through `value`, which traps unless
/// the caller is on the thread that created the box, so the value is never touched by two threads.
public struct LoopBound<Value>: @unchecked Sendable {
    private let boxed: Value
    private let thread: pthread_t

    /// Loop thread only.
    public init(_ value: Value, loop: EventLoop) {
        precondition(loop.isCurrent, "LoopBound is created on the loop thread")
        boxed = value
        thread = pthread_self()
    }

    /// Loop thread only.
    public var value: Value {
        precondition(pthread_equal(pthread_self(), thread) != 0, "LoopBound opened off its loop thread")
        return boxed
    }
}
