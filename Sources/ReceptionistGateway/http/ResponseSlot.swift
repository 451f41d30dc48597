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

    func fill(_ reply: Reply) {
        self.reply = reply
    }
}
