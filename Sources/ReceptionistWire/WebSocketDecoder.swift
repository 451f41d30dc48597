/// An incremental WebSocket frame decoder and message assembler (RFC 6455 sections 5 and 8).
///
/// Bytes go in split anywhere, even one at a time; whole messages come out. The frame header is
/// read a byte at a time (it is at most 14 bytes) and each rule is checked on the byte that
/// decides it, so a violation is reported as early as the stream allows and every split of the
/// same bytes gives the same messages and the same error. Payloads are handled in bulk: each
/// byte is copied once, from the input into the message, and unmasked there in place.
///
/// With an inflater, permessage-deflate is on (RFC 7692): a data message whose first frame has
/// RSV1 set is compressed. Its frames are gathered as they are (the limit then counts compressed
/// bytes) and inflated once whole, stopping one byte past `maxMessageBytes` (1009), so a small
/// message that would inflate to gigabytes costs no more than the limit. Data that is not valid
/// deflate closes with 1007, as invalid UTF-8 does.
///
/// The first violation fails the decoder for good: the stream can no longer be trusted, and the
/// connection must be closed with the error's code. The peer's close frame ends the stream too,
/// since nothing may follow it (RFC 6455 section 5.5.1); bytes after it are ignored.
public struct WebSocketDecoder {
    public enum Role: Sendable {
        /// We are the server: client frames MUST be masked.
        case server
        /// We are the client: server frames MUST NOT be masked.
        case client
    }

    // Fields run from the widest to the narrowest, and the header's counters are bytes: a
    // decoder lives in every connection, so its padding is paid once per connection.

    /// Inflates compressed messages; nil when permessage-deflate was not negotiated, and then
    /// RSV1 is a protocol error. Shared by every decoder of its thread: it is reset per message.
    private let inflater: ZlibStream?

    // The frame being read: its lengths, in one word that serves each stage of the frame in
    // turn (`wireLength`, then `payloadLength` and `received`).
    private var lengths: UInt64 = 0

    // The data message being assembled; `messageKind` is set from its first frame to its last.
    // A control frame, which may arrive in the middle of a message, is read onto its end and
    // taken off whole when the frame ends (`takeControlPayload`), so a decoder keeps one buffer.
    private var message: [UInt8] = []

    // Half words: a payload is checked against the limit before its length is kept, and the
    // limit is at most `Int32.max`, so every length below fits.
    private let messageLimit: Int32
    private var maskKey: UInt32 = 0
    private var utf8 = UTF8Validator()

    public let role: Role

    private enum Stage: Sendable {
        case header, payload, failed, closed
    }

    private var stage = Stage.header
    /// Header bytes read so far, and how many this header has (at most 14).
    private var headerCount: UInt8 = 0
    private var headerLength: UInt8 = 2
    private var extendedLengthBytes: UInt8 = 0
    private var fin = false
    private var opcode = WebSocketOpcode.continuation
    private var masked = false
    private var messageKind: WebSocketOpcode?
    /// The message being assembled is compressed (its first frame had RSV1).
    private var compressed = false

    /// The largest data message accepted, counting the payloads of all its fragments.
    public var maxMessageBytes: Int { Int(messageLimit) }

    /// While the header is read: the payload length as the header's bytes give it, up to 63 bits.
    /// Once `checkLength` has passed it, `payloadLength` and `received` take the word's halves:
    /// nothing reads this after that, and nothing reads those before it.
    private var wireLength: UInt64 {
        get { lengths }
        set { lengths = newValue }
    }
    /// The low half word: the frame's payload length (at most `Int32.max`, by `checkLength`).
    private var payloadLength: Int {
        get { Int(UInt32(truncatingIfNeeded: lengths)) }
        set { lengths = lengths & 0xFFFF_FFFF_0000_0000 | UInt64(UInt32(newValue)) }
    }
    /// The high half word: payload bytes of the frame read so far (at most `payloadLength`).
    private var received: Int {
        get { Int(lengths >> 32) }
        set { lengths = lengths & 0xFFFF_FFFF | UInt64(UInt32(newValue)) << 32 }
    }

    /// `maxMessageBytes` past `Int32.max` is taken as `Int32.max` (2 GiB).
    public init(role: Role = .server, maxMessageBytes: Int = 64 * 1024, inflater: ZlibStream? = nil) {
        precondition(maxMessageBytes >= 0, "maxMessageBytes must not be negative")
        precondition(inflater.map { $0.mode == .inflate } ?? true, "the inflater must be an inflating stream")
        self.role = role
        messageLimit = Int32(clamping: maxMessageBytes)
        self.inflater = inflater
    }

    /// Feeds the next bytes of the stream and returns the messages they complete, in order.
    ///
    /// With an error come the messages completed before it. After the error, or after the peer's
    /// close frame, the decoder returns nothing more.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer) -> (messages: [WebSocketMessage], error: WebSocketError?) {
        var messages: [WebSocketMessage] = []
        let count = bytes.count
        var index = 0
        while index < count {
            switch stage {
            case .failed, .closed:
                return (messages, nil)
            case .header:
                let byte = bytes[index]
                index += 1
                if let error = readHeader(byte) {
                    return fail(error, messages)
                }
                if headerCount == headerLength, let error = beginPayload(into: &messages) {
                    return fail(error, messages)
                }
            case .payload:
                let take = min(count - index, payloadLength - received)
                let chunk = UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)])
                index += take
                if let error = readPayload(chunk, into: &messages) {
                    return fail(error, messages)
                }
            }
        }
        return (messages, nil)
    }

    /// Convenience for tests and callers holding an array.
    public mutating func decode(_ bytes: [UInt8]) -> (messages: [WebSocketMessage], error: WebSocketError?) {
        bytes.withUnsafeBytes { decode($0) }
    }

    private mutating func fail(
        _ error: WebSocketError, _ messages: [WebSocketMessage]
    ) -> (messages: [WebSocketMessage], error: WebSocketError?) {
        stage = .failed
        message = []
        return (messages, error)
    }

    // MARK: - Header

    /// Takes the next header byte and checks whatever it decides.
    private mutating func readHeader(_ byte: UInt8) -> WebSocketError? {
        let position = Int(headerCount)
        headerCount += 1
        switch position {
        case 0:
            // RSV2 and RSV3 belong to no extension we speak; RSV1 is permessage-deflate's, and
            // only on the first frame of a data message (RFC 7692 section 6).
            guard byte & 0x30 == 0 else { return .protocolError("reserved bits set") }
            let rsv1 = byte & 0x40 != 0
            if rsv1 && inflater == nil { return .protocolError("reserved bits set") }
            guard let kind = WebSocketOpcode(rawValue: byte & 0x0F) else { return .protocolError("reserved opcode") }
            fin = byte & 0x80 != 0
            if kind.isControl {
                guard fin else { return .protocolError("fragmented control frame") }
                guard !rsv1 else { return .protocolError("compressed control frame") }
            } else if kind == .continuation {
                guard messageKind != nil else { return .protocolError("continuation without a message") }
                guard !rsv1 else { return .protocolError("RSV1 on a continuation frame") }
            } else {
                guard messageKind == nil else { return .protocolError("new message inside a fragmented one") }
                compressed = rsv1
            }
            opcode = kind
            maskKey = 0
            wireLength = 0
        case 1:
            masked = byte & 0x80 != 0
            switch role {
            case .server: guard masked else { return .protocolError("client frame not masked") }
            case .client: guard !masked else { return .protocolError("server frame masked") }
            }
            let short = byte & 0x7F
            extendedLengthBytes = short == 127 ? 8 : short == 126 ? 2 : 0
            headerLength = 2 + extendedLengthBytes + (masked ? 4 : 0)
            if extendedLengthBytes == 0 {
                wireLength = UInt64(short)
                return checkLength()
            }
        case 2..<(2 + Int(extendedLengthBytes)):
            if position == 2 && extendedLengthBytes == 8 && byte & 0x80 != 0 {
                return .protocolError("64-bit length with the top bit set")
            }
            wireLength = wireLength << 8 | UInt64(byte)
            if position == 1 + Int(extendedLengthBytes) {
                return checkLength()
            }
        default:
            maskKey = maskKey << 8 | UInt32(byte)
        }
        return nil
    }

    /// Checks the payload length as soon as it is known, before any of the payload is buffered:
    /// a control frame carries at most 125 bytes, and a data frame may not take its message over
    /// the limit. Longer-than-needed length encodings are tolerated, as most receivers do; the
    /// value is what counts.
    private mutating func checkLength() -> WebSocketError? {
        if opcode.isControl {
            if wireLength > 125 { return .protocolError("control frame over 125 bytes") }
        } else if wireLength > UInt64(maxMessageBytes - message.count) {
            return .messageTooBig("message over \(maxMessageBytes) bytes")
        }
        // Checked, the length fits in the word's low half, where `payloadLength` reads it; the
        // high half, `received`, is 0.
        return nil
    }

    /// The header is complete: start the frame's payload, or finish an empty frame at once.
    private mutating func beginPayload(into messages: inout [WebSocketMessage]) -> WebSocketError? {
        if opcode == .text || opcode == .binary {
            messageKind = opcode
        }
        received = 0
        stage = .payload
        return payloadLength == 0 ? finishFrame(into: &messages) : nil
    }

    // MARK: - Payload

    private mutating func readPayload(_ chunk: UnsafeRawBufferPointer, into messages: inout [WebSocketMessage]) -> WebSocketError? {
        if opcode.isControl {
            let start = message.count
            message.append(contentsOf: chunk)
            Self.unmask(&message, from: start, key: masked ? maskKey : 0, offset: received)
        } else if fin && opcode != .continuation && chunk.count == payloadLength && !compressed {
            // A whole unfragmented message in hand: build the value straight from the input.
            if let error = deliverWhole(chunk, into: &messages) { return error }
        } else if let error = appendToMessage(chunk) {
            return error
        }
        received += chunk.count
        return received == payloadLength ? finishFrame(into: &messages) : nil
    }

    /// Copies a slice of a data frame into the message, unmasks it there, and checks the text so
    /// far so that invalid UTF-8 fails on the piece that carries it, not at the end of the message.
    private mutating func appendToMessage(_ chunk: UnsafeRawBufferPointer) -> WebSocketError? {
        let start = message.count
        let needed = start + payloadLength - received
        if message.capacity < needed {
            // Grow at least geometrically: a message in many tiny fragments must not copy itself each time.
            message.reserveCapacity(min(max(needed, message.capacity * 2), maxMessageBytes))
        }
        message.append(contentsOf: chunk)
        Self.unmask(&message, from: start, key: masked ? maskKey : 0, offset: received)
        // Compressed text is checked once inflated.
        guard messageKind == .text, !compressed else { return nil }
        var validator = utf8
        let valid = message.withUnsafeBytes { validator.feed(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        utf8 = validator
        return valid ? nil : .invalidPayload("invalid UTF-8 in text")
    }

    /// Unmasks what was just appended to `buffer` from `start`; `offset` is its place in the frame.
    private static func unmask(_ buffer: inout [UInt8], from start: Int, key: UInt32, offset: Int) {
        buffer.withUnsafeMutableBytes { bytes in
            WebSocketMask.apply(key: key, offset: offset, to: UnsafeMutableRawBufferPointer(rebasing: bytes[start...]))
        }
    }

    /// Delivers a single-frame message whose payload is all in `chunk`: one copy into the
    /// message's own storage, unmasked and checked there.
    private mutating func deliverWhole(_ chunk: UnsafeRawBufferPointer, into messages: inout [WebSocketMessage]) -> WebSocketError? {
        let key = masked ? maskKey : 0
        let count = chunk.count
        messageKind = nil
        if opcode == .binary {
            let payload = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                let bytes = UnsafeMutableRawBufferPointer(buffer)
                bytes.copyMemory(from: chunk)
                WebSocketMask.apply(key: key, offset: 0, to: bytes)
                initialized = count
            }
            messages.append(.binary(payload))
            return nil
        }
        var validator = UTF8Validator()
        let text = String(unsafeUninitializedCapacity: count) { buffer in
            let bytes = UnsafeMutableRawBufferPointer(buffer)
            bytes.copyMemory(from: chunk)
            WebSocketMask.apply(key: key, offset: 0, to: bytes)
            return validator.feed(UnsafeRawBufferPointer(bytes)) ? count : 0
        }
        guard validator.isValid else { return .invalidPayload("invalid UTF-8 in text") }
        guard validator.isComplete else { return .invalidPayload("text ends inside a UTF-8 sequence") }
        messages.append(.text(text))
        return nil
    }

    // MARK: - End of frame

    private mutating func finishFrame(into messages: inout [WebSocketMessage]) -> WebSocketError? {
        stage = .header
        headerCount = 0
        headerLength = 2
        switch opcode {
        case .ping:
            messages.append(.ping(takeControlPayload()))
        case .pong:
            messages.append(.pong(takeControlPayload()))
        case .close:
            let payload = takeControlPayload()
            switch Self.closeMessage(payload) {
            case .success(let close):
                messages.append(close)
                stage = .closed
            case .failure(let error):
                return error
            }
        case .text, .binary, .continuation:
            // Not final, or already delivered whole: wait for the next frame.
            guard fin, let kind = messageKind else { return nil }
            messageKind = nil
            if compressed {
                compressed = false
                return inflate(kind, into: &messages)
            }
            let payload = message
            message = []
            let wasComplete = utf8.isComplete
            utf8.reset()
            if kind == .binary {
                messages.append(.binary(payload))
            } else {
                guard wasComplete else { return .invalidPayload("text ends inside a UTF-8 sequence") }
                messages.append(.text(String(decoding: payload, as: UTF8.self)))
            }
        }
        return nil
    }

    /// The payload of the control frame just ended: the last `payloadLength` bytes of `message`,
    /// behind whatever of a data message came before it. With no data message in progress the
    /// buffer goes too, so an idle connection that answers pings keeps none.
    private mutating func takeControlPayload() -> [UInt8] {
        let start = message.count - payloadLength
        guard start > 0 else {
            defer { message = [] }
            return message
        }
        let payload = Array(message[start...])
        message.removeSubrange(start...)
        return payload
    }

    /// A whole compressed message: inflated within the limit, then checked as any message is.
    private mutating func inflate(_ kind: WebSocketOpcode, into messages: inout [WebSocketMessage]) -> WebSocketError? {
        let payload = message
        message = []
        switch inflater!.inflate(payload, limit: maxMessageBytes) {
        case .failure(.tooBig):
            return .messageTooBig("message over \(maxMessageBytes) bytes once inflated")
        case .failure(.invalid):
            return .invalidPayload("invalid compressed data")
        case .success(let bytes):
            if kind == .binary {
                messages.append(.binary(bytes))
                return nil
            }
            guard bytes.withUnsafeBytes({ UTF8Validator.isValid($0) }) else { return .invalidPayload("invalid UTF-8 in text") }
            messages.append(.text(String(decoding: bytes, as: UTF8.self)))
            return nil
        }
    }

    /// Validates a close frame's payload: empty, or a code that may be sent followed by UTF-8.
    private static func closeMessage(_ payload: [UInt8]) -> Result<WebSocketMessage, WebSocketError> {
        if payload.isEmpty {
            return .success(.close(code: nil, reason: ""))
        }
        guard payload.count >= 2 else { return .failure(.protocolError("close payload of 1 byte")) }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard WebSocketCloseCode.isValidOnTheWire(code) else {
            return .failure(.protocolError("invalid close code \(code)"))
        }
        let reason = payload[2...]
        guard reason.withUnsafeBytes({ UTF8Validator.isValid($0) }) else {
            return .failure(.invalidPayload("close reason is not UTF-8"))
        }
        return .success(.close(code: code, reason: String(decoding: reason, as: UTF8.self)))
    }
}
