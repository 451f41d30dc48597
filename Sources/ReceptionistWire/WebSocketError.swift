/// A protocol violation by the peer.
///
/// The connection must be closed with `closeCode` (1002, 1007 or 1009) and `reason`. Reasons are
/// short ASCII, well under the 123 bytes a close frame leaves for them, so they are sent as is.
public struct WebSocketError: Error, Sendable, Equatable {
    public let closeCode: UInt16
    public let reason: String

    public init(closeCode: UInt16, reason: String) {
        self.closeCode = closeCode
        self.reason = reason
    }

    static func protocolError(_ reason: String) -> WebSocketError {
        WebSocketError(closeCode: WebSocketCloseCode.protocolError, reason: reason)
    }

    static func invalidPayload(_ reason: String) -> WebSocketError {
        WebSocketError(closeCode: WebSocketCloseCode.invalidPayload, reason: reason)
    }

    static func messageTooBig(_ reason: String) -> WebSocketError {
        WebSocketError(closeCode: WebSocketCloseCode.messageTooBig, reason: reason)
    }
}
