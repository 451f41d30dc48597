import ReceptionistLoop
import ReceptionistSync

/// A job thread's blocking call into the loop: `start` runs on the loop with a completion, and
/// the caller waits for it. Never call it on the loop thread.
enum LoopCall {
    /// Returns what the completion was given, or `timedOut` after `seconds` (or if the loop has
    /// shut down). A completion that comes after the time-out is ignored.
    static func wait<T: Sendable>(
        _ mailbox: Mailbox, seconds: Double, timedOut: T,
        _ start: @escaping @Sendable (@escaping @Sendable (T) -> Void) -> Void
    ) -> T {
        let slot = ConditionLock<T?>(nil)
        let posted = mailbox.post {
            start { value in
                slot.withLock { if $0 == nil { $0 = value } }
                slot.broadcast()
            }
        }
        guard posted == .accepted else { return timedOut }
        return slot.wait(seconds: seconds, until: { $0 != nil }, then: { value, _ in value ?? timedOut })
    }
}
