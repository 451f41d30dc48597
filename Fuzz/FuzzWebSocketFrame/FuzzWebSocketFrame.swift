import FuzzSupport
import ReceptionistWire

/// Fuzzes `WebSocketDecoder`.
///
/// Input: a byte choosing how the stream is split, a byte choosing the role, the message limit
/// and whether permessage-deflate is on (then RSV1 messages are inflated within the limit), then
/// the stream. The stream is decoded whole and in pieces; both must give the same
/// messages and the same error. Every message must respect the limits, and encoding it again with
/// `WebSocketEncoder` and decoding that must give it back.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocketFrame(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let splitSeed = input.takeByte()
    let config = Int(input.takeByte())
    let role: WebSocketDecoder.Role = config & 1 == 0 ? .server : .client
    let maxMessageBytes = [0, 1, 125, 126, 1000, 4096, 65535, 64 * 1024][(config >> 1) & 7]
    // One inflater for both decodes, as the gateway shares one: it is reset after every message.
    let inflater = config & 0x10 != 0 ? ZlibStream(.inflate) : nil
    let stream = input.rest

    let whole = DecodedStream(role: role, maxMessageBytes: maxMessageBytes, inflater: inflater, pieces: [stream[...]])
    let split = DecodedStream(
        role: role, maxMessageBytes: maxMessageBytes, inflater: inflater, pieces: fuzzPieces(stream, seed: splitSeed))
    fuzzCheck(whole == split, "whole and split decodes differ:\n\(whole)\n\(split)")
    whole.check(streamBytes: stream.count, maxMessageBytes: maxMessageBytes, inflated: inflater != nil)
    whole.checkRoundTrip(role: role, maxMessageBytes: maxMessageBytes)
    return 0
}

/// Everything one decoder produced over a stream fed in pieces.
struct DecodedStream: Equatable, CustomStringConvertible {
    var messages: [WebSocketMessage] = []
    var error: WebSocketError?

    init(role: WebSocketDecoder.Role, maxMessageBytes: Int, inflater: ZlibStream? = nil, pieces: [ArraySlice<UInt8>]) {
        var decoder = WebSocketDecoder(role: role, maxMessageBytes: maxMessageBytes, inflater: inflater)
        var ended = false
        for piece in pieces {
            let output = decoder.decode(Array(piece))
            if ended {
                fuzzCheck(output.messages.isEmpty && output.error == nil, "decoder produced output after its end")
                continue
            }
            messages += output.messages
            error = output.error
            if case .close = messages.last { ended = true }
            if error != nil { ended = true }
        }
    }

    var description: String {
        "\(messages.map(Self.summary)) error \(error.map { "\($0.closeCode) \($0.reason)" } ?? "none")"
    }

    static func summary(_ message: WebSocketMessage) -> String {
        switch message {
        case .text(let text): "text(\(text.utf8.count))"
        case .binary(let bytes): "binary(\(bytes.count))"
        case .ping(let bytes): "ping(\(bytes.count))"
        case .pong(let bytes): "pong(\(bytes.count))"
        case .close(let code, let reason): "close(\(code.map(String.init) ?? "-"), \(reason.utf8.count))"
        }
    }

    func check(streamBytes: Int, maxMessageBytes: Int, inflated: Bool) {
        if let error {
            fuzzCheck([1002, 1007, 1009].contains(error.closeCode), "error with close code \(error.closeCode)")
            fuzzCheck(error.reason.utf8.count <= 123, "error reason too long for a close frame")
        }
        var payloadBytes = 0
        for (index, message) in messages.enumerated() {
            switch message {
            case .text(let text):
                fuzzCheck(text.utf8.count <= maxMessageBytes, "text message over the limit")
                payloadBytes += text.utf8.count
            case .binary(let bytes):
                fuzzCheck(bytes.count <= maxMessageBytes, "binary message over the limit")
                payloadBytes += bytes.count
            case .ping(let bytes), .pong(let bytes):
                fuzzCheck(bytes.count <= 125, "control payload over 125 bytes")
                payloadBytes += bytes.count
            case .close(let code, let reason):
                fuzzCheck(index == messages.count - 1 && error == nil, "something follows the close")
                fuzzCheck(code.map(WebSocketCloseCode.isValidOnTheWire) ?? reason.isEmpty, "bad close code \(String(describing: code))")
                fuzzCheck(reason.utf8.count <= 123, "close reason over 123 bytes")
                payloadBytes += reason.utf8.count + (code == nil ? 0 : 2)
            }
        }
        // Every frame costs at least two header bytes, so payloads cannot outgrow the stream,
        // unless they were inflated: then each message is held to the limit above alone.
        fuzzCheck(inflated || payloadBytes <= streamBytes, "\(payloadBytes) payload bytes out of a \(streamBytes)-byte stream")
    }

    /// Encodes the messages again, as the peer would (masked when we are the server), and checks
    /// that decoding gives the same messages.
    func checkRoundTrip(role: WebSocketDecoder.Role, maxMessageBytes: Int) {
        let mask: UInt32? = role == .server ? 0x1234_5678 : nil
        var stream: [UInt8] = []
        for message in messages {
            switch message {
            case .text(let text): stream += WebSocketEncoder.frame(.text, payload: text.utf8, maskKey: mask)
            case .binary(let bytes): stream += WebSocketEncoder.frame(.binary, payload: bytes, maskKey: mask)
            case .ping(let bytes): stream += WebSocketEncoder.frame(.ping, payload: bytes, maskKey: mask)
            case .pong(let bytes): stream += WebSocketEncoder.frame(.pong, payload: bytes, maskKey: mask)
            case .close(let code?, let reason): stream += WebSocketEncoder.close(code: code, reason: reason, maskKey: mask)
            case .close(nil, _): stream += WebSocketEncoder.frame(.close, payload: [], maskKey: mask)
            }
        }
        let again = DecodedStream(role: role, maxMessageBytes: maxMessageBytes, pieces: [stream[...]])
        fuzzCheck(again.messages == messages && again.error == nil, "re-encoded messages decode differently: \(again)")
    }
}

@main
enum FuzzWebSocketFrameMain {
    static func main() {
        FuzzDriver.main(fuzzWebSocketFrame)
    }
}
