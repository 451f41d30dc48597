import ReceptionistWire

/// A reply owed to one request, filled now or later by a job thread. Loop thread only.
final class ResponseSlot {
    let method: HTTPMethod
    let target: String
    let keepAlive: Bool
    private(set) var reply: Reply?

    init(method: HTTPMethod, target: String, keepAlive: Bool) {
        self.method = method
        self.target = target
        self.keepAlive = keepAlive
    }

    /// The target with a `token=` value hidden, for the log: subscription tokens are credentials,
    /// and logs travel further than the gateway.
    var redactedTarget: String {
        guard let query = target.firstIndex(of: "?") else { return target }
        let pairs = target[target.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false)
        return String(target[...query]) + pairs.map { $0.hasPrefix("token=") ? "token=…" : String($0) }.joined(separator: "&")
    }

    /// Told when a reply comes later (`answer`). Weak: a reply may come after the connection is gone.
    weak var session: HTTPSession?

    func fill(_ reply: Reply) {
        self.reply = reply
    }

    /// The hold on this request's job-thread work, which its answer ends (`HTTPSession.process`).
    var hold: JobHold?

    /// The door for a reply given later, on the loop: fills the slot and tells the session. As a
    /// method of the slot, handed on as `slot.answer`, the door needs no allocation of its own.
    func answer(_ reply: Reply) {
        self.reply = reply
        session?.slotFilled()
        if let hold {
            self.hold = nil
            hold.end()
        }
    }
}
