/// The answers each WebSocket connection still owes its client: requests it took and handed on
/// (a commit to a job thread; a publish to Redis or the disk; an RPC to the backend), whose
/// answers come later. A connection that must close (its client's close frame, a frame that
/// breaks the protocol, a drain, an expired token or a refused grant) sends its close frame once
/// they are written: a request that was taken is answered, never applied in silence (invariant
/// 64); a slow consumer too, though it gets nothing else meanwhile. Kept beside the sessions, not in them: an
/// idle connection owes nothing and pays nothing, and one that owes nothing keeps no account.
///
/// Each answer is bounded in time by its own path (`--redis-timeout`, `--hook-timeout`, the job
/// queue's limit), so a close never waits longer than the slowest of them.
///
/// Loop thread only.
final class OwedAnswers {
    /// One connection's: how many answers it owes, and the close that waits for them.
    private final class Account {
        var owed = 0
        var closing: (() -> Void)?
        /// The close waiting is a slow consumer's: nothing but the answers goes out meanwhile.
        var stopsPushes = false
    }

    private var accounts: [ObjectIdentifier: Account] = [:]

    /// Connections that owe an answer now.
    var count: Int { accounts.count }

    /// Counts one more answer `connection` owes. The function returned settles it: call it once,
    /// after the answer is written (or found nobody to go to); the last one lets a waiting close go.
    func owe(_ connection: AnyObject) -> () -> Void {
        let key = ObjectIdentifier(connection)
        let account: Account
        if let open = accounts[key] {
            account = open
        } else {
            account = Account()
            accounts[key] = account
        }
        account.owed += 1
        return { [weak self] in
            account.owed -= 1
            guard account.owed == 0 else { return }
            // A connection closed and forgotten may have left its identity to a new one.
            if self?.accounts[key] === account { self?.accounts[key] = nil }
            let close = account.closing
            account.closing = nil
            close?()
        }
    }

    /// Runs `close` once `connection` owes nothing: now, or right after its last answer. With
    /// `stoppingPushes`, the connection sends nothing but those answers meanwhile.
    func whenSettled(_ connection: AnyObject, stoppingPushes: Bool = false, close: @escaping () -> Void) {
        guard let account = accounts[ObjectIdentifier(connection)] else { return close() }
        account.closing = close
        account.stopsPushes = stoppingPushes
    }

    /// Whether `connection` waits for its answers to close as a slow consumer.
    func stopsPushes(_ connection: AnyObject) -> Bool {
        !accounts.isEmpty && accounts[ObjectIdentifier(connection)]?.stopsPushes == true
    }

    /// Whether a close waits for `connection`'s answers.
    func isClosing(_ connection: AnyObject) -> Bool {
        !accounts.isEmpty && accounts[ObjectIdentifier(connection)]?.closing != nil
    }

    /// `connection` is closed: nothing waits for its answers any more.
    func forget(_ connection: AnyObject) {
        guard let account = accounts.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        account.closing = nil
    }
}
