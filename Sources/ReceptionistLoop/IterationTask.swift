/// Work deferred to the end of the loop's current iteration: after its IO and timers, before its
/// connections flush, so that what the work writes leaves in that same flush.
///
/// The push hub's fan-out runs here: a topic that was published to several times in one
/// iteration hands each subscriber all of those messages at once. Scheduling is idempotent until
/// the work has run, and a scheduled task keeps the loop's poll from blocking, as a dirty
/// connection does.
///
/// Loop thread only.
public final class IterationTask: LoopFlushable {
    /// Not counted, as a handle's loop is not: the loop outlives everything made on it.
    private unowned(unsafe) let loop: EventLoop
    private let body: () -> Void
    private var scheduled = false

    public init(loop: EventLoop, _ body: @escaping () -> Void) {
        self.loop = loop
        self.body = body
    }

    /// Runs the work once at the end of this iteration (or of the next, when called from inside
    /// the loop's flush after the work has already run).
    public func schedule() {
        guard !scheduled else { return }
        scheduled = true
        loop.scheduleBeforeFlush(self)
    }

    func flush() {
        scheduled = false
        body()
    }
}
