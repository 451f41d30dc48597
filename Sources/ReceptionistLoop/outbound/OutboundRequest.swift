/// A request the gateway makes of another server (a backend's hook): a `POST` of a body.
public struct OutboundRequest: Sendable {
    public var url: String
    /// Header lines, `Name: value`; a value must hold no CR or LF.
    public var headers: [String]
    public var body: [UInt8]
    /// The whole call, connecting included, must end by then.
    public var timeoutMilliseconds: UInt64

    public init(url: String, headers: [String] = [], body: [UInt8], timeoutMilliseconds: UInt64) {
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMilliseconds = timeoutMilliseconds
    }
}

/// What became of an `OutboundRequest`: the server's answer, or why there is none.
public enum OutboundResponse: Sendable, Equatable {
    case answered(status: Int, body: [UInt8])
    case failed(Failure)

    public enum Failure: Sendable, Equatable {
        /// No answer within the request's time-out.
        case timedOut
        /// The answer was larger than the client takes (`HTTPClient.maxResponseBytes`).
        case tooLarge
        /// The client was closed before the answer came (the gateway is stopping).
        case cancelled
        /// Anything else: refused, reset, a name that does not resolve…, in libcurl's words.
        case transport(String)
    }
}
