/// Decides when the failures of something tried again and again (a disk write, a hook call) are
/// logged: the first, then at most once every `intervalSeconds` with how many failed since the
/// last one logged, and once when it works again after a failure was logged. A backend down
/// fails every call, and one that fails by turns would otherwise log on every other call.
///
/// Pure, with time injected (seconds on any clock that only moves forward); its owner's thread.
public struct FailureLog: Sendable {
    public let intervalSeconds: Double
    private var loggedAt: Double?
    private var unlogged = 0
    private var awaitingRecovery = false

    public init(intervalSeconds: Double = 10) {
        self.intervalSeconds = intervalSeconds
    }

    /// A failure at `now`: how many failures to log (this one and those left unlogged since the
    /// last), or nil to stay quiet.
    public mutating func failed(now: Double) -> Int? {
        unlogged += 1
        if let loggedAt, now - loggedAt < intervalSeconds { return nil }
        loggedAt = now
        awaitingRecovery = true
        defer { unlogged = 0 }
        return unlogged
    }

    /// A success: whether to log that it works again (a failure was logged since the last).
    public mutating func succeeded() -> Bool {
        defer { awaitingRecovery = false }
        return awaitingRecovery
    }
}
