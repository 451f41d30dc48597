@testable import ReceptionistWire

/// The mask key of the RFC 6455 section 5.7 examples.
let rfcMaskKey: UInt32 = 0x37FA_213D

/// How a test frame writes its payload length; RFC 6455 lets a sender use a longer form than needed.
enum LengthForm {
    case shortest, sixteenBit, sixtyFourBit
}

/// Builds a frame by hand, apart from `WebSocketEncoder`, so decoder tests do not rest on the
/// encoder, and so tests can set bits the encoder never would.
func rawFrame(
    _ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, mask: UInt32? = rfcMaskKey,
    length form: LengthForm = .shortest
) -> [UInt8] {
    var out: [UInt8] = [(fin ? 0x80 : 0) | (rsv << 4) | opcode]
    let maskBit: UInt8 = mask == nil ? 0 : 0x80
    let count = payload.count
    switch form {
    case .shortest where count <= 125:
        out.append(maskBit | UInt8(count))
    case .shortest where count <= 0xFFFF, .sixteenBit:
        out += [maskBit | 126, UInt8(count >> 8), UInt8(count & 0xFF)]
    default:
        out.append(maskBit | 127)
        out += (0..<8).reversed().map { UInt8(truncatingIfNeeded: UInt64(count) >> UInt64($0 * 8)) }
    }
    guard let mask else { return out + payload }
    let key = (0..<4).map { UInt8(truncatingIfNeeded: mask >> UInt32(24 - 8 * $0)) }
    out += key
    out += payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    return out
}

/// A masked client frame of the given opcode (server-role decoding).
func client(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
    rawFrame(opcode.rawValue, payload, fin: fin)
}

func client(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true) -> [UInt8] {
    client(opcode, Array(text.utf8), fin: fin)
}

/// Everything a decoder produced over a whole stream, fed in `pieces`.
struct Decoded: Equatable, CustomStringConvertible {
    var messages: [WebSocketMessage] = []
    var error: WebSocketError?

    var description: String { "\(messages) error: \(error.map { "\($0.closeCode) \($0.reason)" } ?? "none")" }
}

func decode(
    _ pieces: [[UInt8]], role: WebSocketDecoder.Role = .server, maxMessageBytes: Int = 64 * 1024
) -> Decoded {
    var decoder = WebSocketDecoder(role: role, maxMessageBytes: maxMessageBytes)
    var all = Decoded()
    for piece in pieces {
        let output = decoder.decode(piece)
        all.messages += output.messages
        if let error = output.error {
            // Two errors from one decoder would break the contract that the first one is final.
            all.error = all.error == nil ? error : WebSocketError(closeCode: 0, reason: "second error")
        }
    }
    return all
}

func decode(_ stream: [UInt8], role: WebSocketDecoder.Role = .server, maxMessageBytes: Int = 64 * 1024) -> Decoded {
    decode([stream], role: role, maxMessageBytes: maxMessageBytes)
}

/// The stream cut in two at `cut`.
func halves(_ stream: [UInt8], at cut: Int) -> [[UInt8]] {
    [Array(stream[..<cut]), Array(stream[cut...])]
}

func concat(_ pieces: [UInt8]...) -> [UInt8] {
    pieces.flatMap { $0 }
}
