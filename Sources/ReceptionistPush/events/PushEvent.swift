import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// One server message for many subscribers: its JSON is encoded once, and each transport's bytes
/// are built once, on first use, then shared by every subscriber of that transport.
///
/// Loop thread only.
public final class PushEvent {
    /// The SSE event name, which is also the message's `type`.
    public let name: String
    /// The store version or topic sequence number the event carries, used for ordering and as the
    /// SSE `id:`; nil for events that do not advance the stream (such as `subscribed` or `gap`).
    public let id: UInt64?
    public let json: [UInt8]
    /// The change set behind a `changes` event, kept so a slow subscriber can conflate it.
    public let changeSet: ChangeSet?

    private var webSocketBytes: SharedBytes?
    /// The permessage-deflate frame per compressor window (nearly always one: 15 bits).
    private var compressedFrames: [(windowBits: Int, frame: SharedBytes)] = []
    private var sseBytes: SharedBytes?

    public init(name: String, id: UInt64?, json: [UInt8], changeSet: ChangeSet? = nil) {
        self.name = name
        self.id = id
        self.json = json
        self.changeSet = changeSet
    }

    /// The event as one unmasked WebSocket text frame.
    public var webSocketFrame: SharedBytes {
        if let webSocketBytes { return webSocketBytes }
        // The header and the JSON straight into the shared buffer: no frame array in between.
        let bytes = SharedBytes(WebSocketEncoder.header(.text, length: json.count), json, EmptyCollection())
        webSocketBytes = bytes
        return bytes
    }

    /// The event as one permessage-deflate frame (RSV1 set), compressed on first use with
    /// `compressor` and then shared by every subscriber that negotiated the same window, as the
    /// plain frame is. A message shorter than `minBytes`, or one that would not shrink, is the
    /// plain frame instead.
    public func webSocketFrame(compressedBy compressor: ZlibStream, minBytes: Int) -> SharedBytes {
        guard json.count >= minBytes, case .deflate(let windowBits, _) = compressor.mode else { return webSocketFrame }
        for entry in compressedFrames where entry.windowBits == windowBits { return entry.frame }
        let deflated = compressor.compress(json)
        let frame = deflated.count < json.count
            ? SharedBytes(WebSocketEncoder.header(.text, length: deflated.count, compressed: true), deflated, EmptyCollection())
            : webSocketFrame
        compressedFrames.append((windowBits, frame))
        return frame
    }

    /// The event in `text/event-stream` framing.
    public var sseEvent: SharedBytes {
        if let sseBytes { return sseBytes }
        let bytes = SharedBytes(SSEEncoder.head(name, id: id), json, SSEEncoder.end)
        sseBytes = bytes
        return bytes
    }

    public static func changes(_ changeSet: ChangeSet, old: Bool = false) -> PushEvent {
        PushEvent(name: "changes", id: changeSet.version, json: PushEncoder.changes(changeSet, old: old), changeSet: changeSet)
    }
}
