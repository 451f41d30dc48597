import DequeModule
import ReceptionistJSON

/// One replicated store's commits on this node: one at the log at a time, so this node's
/// commits never conflict with each other (only with other nodes'), and the rest waiting in the
/// order they came, at most `limit` of them. No thread waits in it: each commit carries its
/// completion. Pure state, kept under the store's lock.
struct ReplicatedCommitQueue {
    /// A commit not yet answered.
    struct Pending: Sendable {
        let operations: [StoreOperation]
        /// What must hold, checked against the replica at the version the log is asked to be at.
        var condition: CommitCondition = .none
        let completion: @Sendable (Result<ChangeSet, StoreError>) -> Void
        /// Times it has been sent to the log (it is sent again after a conflict).
        var attempts = 0
    }

    /// What `submit` decided.
    enum Admission {
        /// Nothing is at the log: the caller sends this one now.
        case start(Pending)
        /// Queued behind the commit at the log.
        case queued
        /// `limit` commits wait already.
        case refused
    }

    let limit: Int
    private(set) var waiting: Deque<Pending> = []
    /// A commit is at the log (or being computed for it).
    private(set) var inFlight = false

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    mutating func submit(_ pending: Pending) -> Admission {
        guard inFlight else {
            inFlight = true
            return .start(pending)
        }
        // Invariant: at most `limit` commits of one store wait on one node.
        guard waiting.count < limit else { return .refused }
        waiting.append(pending)
        return .queued
    }

    /// The commit at the log was answered: the next one to send, if any.
    mutating func finished() -> Pending? {
        precondition(inFlight, "a commit finished that was never started")
        if let next = waiting.popFirst() { return next }
        inFlight = false
        return nil
    }
}
