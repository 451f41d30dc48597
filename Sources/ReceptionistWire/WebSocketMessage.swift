/// One complete message from the peer, as the decoder hands it over.
///
/// Data messages are whole (fragments already joined); control messages arrive as soon as their
/// frame does, even between the fragments of a data message.
public enum WebSocketMessage: Sendable, Equatable {
    /// A text message, already checked to be valid UTF-8.
    case text(String)
    case binary([UInt8])
    /// The application data to echo in the pong, as received.
    case ping([UInt8])
    case pong([UInt8])
    /// The peer's close frame, already validated; `code` is nil when the payload was empty.
    case close(code: UInt16?, reason: String)
}
