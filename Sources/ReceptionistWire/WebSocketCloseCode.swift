/// Close status codes we use (RFC 6455 section 7.4.1).
///
/// Codes stay plain `UInt16` values because a peer may send any code in 3000-4999, which an enum
/// could not hold without an escape case.
public enum WebSocketCloseCode {
    public static let normal: UInt16 = 1000
    public static let goingAway: UInt16 = 1001
    public static let protocolError: UInt16 = 1002
    public static let unsupportedData: UInt16 = 1003
    public static let invalidPayload: UInt16 = 1007
    public static let policyViolation: UInt16 = 1008
    public static let messageTooBig: UInt16 = 1009
    /// The server cannot admit the client now (the connect hook did not answer): try again later.
    public static let tryAgainLater: UInt16 = 1013

    /// Whether a peer may send `code` in a close frame.
    ///
    /// 1004 is reserved, and 1005, 1006 and 1015 only stand for "no code" or "no close frame"
    /// inside an endpoint, so none of them may appear on the wire. 1012-1014 were registered with
    /// IANA after RFC 6455 (restart, try again later, bad gateway) and are accepted, as the Autobahn
    /// suite expects; the rest of 1000-2999 is unassigned. 3000-4999 belong to libraries and
    /// applications.
    public static func isValidOnTheWire(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }
}
