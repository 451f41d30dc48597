import ReceptionistSync
import ReceptionistWire

/// A handler's answer: a response, and optionally a body that is shared rather than copied.
struct Reply: Sendable {
    var response: HTTPResponse
    /// When set, sent as the body instead of `response.body` (static files keep theirs in memory).
    var sharedBody: SharedBytes?
    /// The request was hostile enough that the connection should not serve another.
    var closesConnection: Bool
    /// False when the answer is a failure whose write may have happened all the same (a lost or
    /// late answer from Redis): an idempotency key must not be freed for a retry then.
    var outcomeKnown = true

    init(_ response: HTTPResponse, sharedBody: SharedBytes? = nil, closesConnection: Bool = false) {
        self.response = response
        self.sharedBody = sharedBody
        self.closesConnection = closesConnection
    }

    var contentLength: Int { sharedBody?.count ?? response.body.count }
}
