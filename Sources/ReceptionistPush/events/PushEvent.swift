import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// One server message for many subscribers: its JSON is encoded once, and each transport's bytes
/// are built once, on first use, then shared by every subscriber of that transport.
///
/// Or a run: consecutive messages of one topic that leave together (`Topic`'s deferred fan-out).
/// A run's bytes in each transport are its messages' bytes one after another, built once and
/// written to each subscriber as one buffer; its `id` is its last message's, and it has no JSON
/// of its own.
///
/// Loop thread only.
public final class PushEvent {
    /// The SSE event name, which is also the message's `type`.
    public let name: String
    /// The store version or topic sequence number the event carries, used for ordering and as the
    /// SSE `id:`; nil for events that do not advance the stream (presence). A `gap` is numbered
    /// by its last lost message, a resumed `subscribed` by where the resume began.
    public let id: UInt64?
    /// The epoch `id` belongs to (its store's or topic's), written into the SSE `id:` beside it so
    /// an `EventSource`'s own reconnection resumes only within it; nil where there is no `id`.
    public let epoch: String?
    public let json: [UInt8]
    /// The change set behind a `changes` event, kept so a slow subscriber can conflate it.
    public let changeSet: ChangeSet?
    /// A run's messages, oldest first, numbered one after another; empty for a single event.
    public let run: [PushEvent]

    private var webSocketBytes: SharedBytes?
    /// The permessage-deflate frame per compressor window (nearly always one: 15 bits), and how
    /// many of its messages are compressed in it (a message too short to gain stays plain).
    private var compressedFrames: [(windowBits: Int, frame: SharedBytes, compressed: Int)] = []
    private var sseBytes: SharedBytes?

    public init(name: String, id: UInt64?, epoch: String? = nil, json: [UInt8], changeSet: ChangeSet? = nil) {
        self.name = name
        self.id = id
        self.epoch = epoch
        self.json = json
        self.changeSet = changeSet
        run = []
    }

    /// A run of `messages` (two or more, numbered one after another).
    public init(run messages: [PushEvent]) {
        precondition(messages.count > 1, "a run holds two messages or more")
        name = messages[0].name
        id = messages[messages.count - 1].id
        epoch = messages[messages.count - 1].epoch
        json = []
        changeSet = nil
        run = messages
    }

    /// How many messages the event carries: a run's count, else one.
    public var messageCount: Int { run.isEmpty ? 1 : run.count }

    /// The event as one unmasked WebSocket text frame.
    public var webSocketFrame: SharedBytes {
        if let webSocketBytes { return webSocketBytes }
        // Written straight into the shared buffer, a run's frames one after another: no header
        // array, and no frame of each message made only to be copied into the run's.
        let bytes = SharedBytes(count: webSocketFrameCount) { start in _ = writeWebSocketFrame(at: start) }
        webSocketBytes = bytes
        return bytes
    }

    /// The size of `webSocketFrame`, without making it.
    private var webSocketFrameCount: Int {
        if let webSocketBytes { return webSocketBytes.count }
        if run.isEmpty { return WebSocketEncoder.headerCount(length: json.count) + json.count }
        return run.reduce(0) { $0 + $1.webSocketFrameCount }
    }

    /// Writes `webSocketFrame`'s bytes at `start` (room for `webSocketFrameCount`), copied from it
    /// when it was made; returns how many.
    private func writeWebSocketFrame(at start: UnsafeMutableRawPointer) -> Int {
        if let webSocketBytes {
            start.copyMemory(from: webSocketBytes.base, byteCount: webSocketBytes.count)
            return webSocketBytes.count
        }
        guard run.isEmpty else { return run.reduce(0) { $0 + $1.writeWebSocketFrame(at: start + $0) } }
        let header = WebSocketEncoder.writeHeader(.text, length: json.count, at: start)
        json.withUnsafeBytes { payload in
            if let source = payload.baseAddress { (start + header).copyMemory(from: source, byteCount: payload.count) }
        }
        return header + json.count
    }

    /// The event as one permessage-deflate frame (RSV1 set), compressed on first use with
    /// `compressor` and then shared by every subscriber that negotiated the same window, as the
    /// plain frame is. A message shorter than `minBytes`, or one that would not shrink, is the
    /// plain frame instead.
    ///
    /// Returns the frame, and how many of its messages it holds compressed (a run may hold both
    /// kinds).
    public func compressedWebSocketFrame(compressedBy compressor: ZlibStream, minBytes: Int)
        -> (frame: SharedBytes, compressed: Int)
    {
        guard case .deflate(let windowBits, _) = compressor.mode else { return (webSocketFrame, 0) }
        for entry in compressedFrames where entry.windowBits == windowBits { return (entry.frame, entry.compressed) }
        let made: (frame: SharedBytes, compressed: Int)
        if !run.isEmpty {
            let frames = run.map { $0.compressedWebSocketFrame(compressedBy: compressor, minBytes: minBytes) }
            made = (SharedBytes(joining: frames.map(\.frame)), frames.reduce(0) { $0 + $1.compressed })
        } else if json.count < minBytes {
            return (webSocketFrame, 0)
        } else {
            let deflated = compressor.compress(json)
            made = deflated.count < json.count
                ? (SharedBytes(WebSocketEncoder.header(.text, length: deflated.count, compressed: true), deflated), 1)
                : (webSocketFrame, 0)
        }
        compressedFrames.append((windowBits, made.frame, made.compressed))
        return made
    }

    /// The event in `text/event-stream` framing.
    public var sseEvent: SharedBytes {
        if let sseBytes { return sseBytes }
        let bytes = run.isEmpty
            ? SharedBytes(SSEEncoder.head(name, id: id, epoch: epoch), json, SSEEncoder.end)
            : SharedBytes(joining: run.map(\.sseEvent))
        sseBytes = bytes
        return bytes
    }

    public static func changes(_ changeSet: ChangeSet, old: Bool = false, epoch: String? = nil) -> PushEvent {
        PushEvent(
            name: "changes", id: changeSet.version, epoch: epoch, json: PushEncoder.changes(changeSet, old: old), changeSet: changeSet)
    }
}
