import ReceptionistJSON

/// Server-Sent Events framing (the HTML standard's `text/event-stream`). Pure.
public enum SSEEncoder {
    /// One event. `data` must hold no line breaks (compact JSON never does); `id` is omitted when
    /// nil, and written `<id>@<epoch>` with an epoch.
    public static func event(_ name: String, id: UInt64?, epoch: String? = nil, data: [UInt8]) -> [UInt8] {
        var out = head(name, id: id, epoch: epoch)
        out.reserveCapacity(out.count + data.count + end.count)
        out += data
        out += end
        return out
    }

    /// What comes before an event's data (its name, its id and `data: `), for a sender that lays
    /// the data after it itself; `end` follows the data.
    public static func head(_ name: String, id: UInt64?, epoch: String? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(name.utf8.count + 32)
        out += "event: ".utf8
        out += name.utf8
        if let id {
            out += "\nid: ".utf8
            JSONWriter.writeDecimal(id, to: &out)
            if let epoch {
                out.append(UInt8(ascii: "@"))
                out += epoch.utf8
            }
        }
        out += "\ndata: ".utf8
        return out
    }

    public static let end: [UInt8] = Array("\n\n".utf8)

    /// Sets the client's reconnection delay (`EventSource` waits this long before it reconnects).
    public static func retry(milliseconds: UInt64) -> [UInt8] {
        Array("retry: \(milliseconds)\n\n".utf8)
    }

    /// A comment line, which keeps proxies and clients from timing the stream out.
    public static let heartbeat: [UInt8] = Array(": heartbeat\n\n".utf8)

    /// A heartbeat the page hears (`EventSource` hides comments): a `heartbeat` event naming the
    /// interval at which one comes while the stream has nothing else to send.
    public static func heartbeatEvent(intervalMilliseconds: UInt64) -> [UInt8] {
        var data = Array(#"{"type":"heartbeat","intervalMs":"#.utf8)
        JSONWriter.writeDecimal(intervalMilliseconds, to: &data)
        data.append(UInt8(ascii: "}"))
        return event("heartbeat", id: nil, data: data)
    }
}
