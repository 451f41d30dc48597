import ReceptionistSync

/// A loop-thread value carried through a `@Sendable` closure; opening it off the loop traps.
public typealias LoopBound<Value> = ThreadBound<Value>

extension ThreadBound {
    /// Loop thread only: binds `value` to the loop's thread.
    public init(_ value: Value, loop: EventLoop) {
        precondition(loop.isCurrent, "LoopBound is created on the loop thread")
        self.init(value)
    }
}
