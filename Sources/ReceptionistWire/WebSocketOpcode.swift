/// The frame opcodes of RFC 6455 section 5.2; the reserved ones (3-7, B-F) have no case, so a
/// frame that carries one fails to decode.
public enum WebSocketOpcode: UInt8, Sendable {
    case continuation = 0x0, text = 0x1, binary = 0x2, close = 0x8, ping = 0x9, pong = 0xA

    /// Control frames (close, ping, pong) may not be fragmented and carry at most 125 bytes.
    public var isControl: Bool { rawValue & 0x8 != 0 }
}
