/// WebSocket connections whose close frame is sent and not answered within the close timeout,
/// while the peer is still reading what was queued before it: a subscriber on a slow link, closed
/// as a slow consumer behind `--max-queued-bytes` and the kernel's buffers, reads for longer than
/// the timeout before it even gets the close frame. Such a peer is waited for while it takes
/// bytes, at most one close timeout without taking any and `longestWaitFactor` timeouts in all;
/// one that reads nothing is aborted as before. Kept beside the sessions: only connections past
/// their close timeout have an entry, and a closed one has none.
///
/// Loop thread only.
final class CloseWaits {
    private struct Wait {
        var unsent: Int
        var progressAt: UInt64
        let since: UInt64
    }

    /// How many close timeouts a peer that keeps reading may take in all (2 s → 30 s).
    static let longestWaitFactor: UInt64 = 15

    private var waits: [ObjectIdentifier: Wait] = [:]

    /// Connections waited for now.
    var count: Int { waits.count }

    /// Whether to wait on for `connection`, whose close timeout (`timeout` milliseconds) has
    /// passed at `now`: its peer has taken bytes within the last close timeout, and not all of the
    /// wait is spent. Measured at each sweep by what the peer has not acknowledged yet (`unsent`:
    /// the connection's `unsentBytes`, one system call).
    func peerStillReads(_ connection: AnyObject, unsent: Int, now: UInt64, timeout: UInt64) -> Bool {
        let key = ObjectIdentifier(connection)
        // Everything reached the peer, our close frame included: it only failed to answer.
        guard unsent > 0 else {
            waits[key] = nil
            return false
        }
        guard var wait = waits[key] else {
            waits[key] = Wait(unsent: unsent, progressAt: now, since: now)
            return true
        }
        if unsent < wait.unsent {
            wait.unsent = unsent
            wait.progressAt = now
        }
        let spent = now &- wait.since >= timeout * (Self.longestWaitFactor - 1)
        guard !spent, now &- wait.progressAt < timeout else {
            waits[key] = nil
            return false
        }
        waits[key] = wait
        return true
    }

    func forget(_ connection: AnyObject) {
        if !waits.isEmpty { waits[ObjectIdentifier(connection)] = nil }
    }
}
