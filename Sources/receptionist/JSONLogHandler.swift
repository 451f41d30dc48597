import Glibc
import Logging
import ReceptionistJSON

/// `--log-format json`: one JSON object per line on standard error, for log collectors.
///
/// Fields: `ts` (RFC 3339, UTC, milliseconds), `level`, `label`, `message`, `source`, and every
/// metadata key at the top level.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // The fixed fields first, then the metadata in key order.
        var fields: JSONObject = [
            "ts": .string(Self.timestamp()), "level": .string(event.level.rawValue), "label": .string(label),
            "message": .string(event.message.description), "source": .string(event.source),
        ]
        let merged = metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 })
        for key in merged.keys.sorted() where fields[key] == nil {
            fields[key] = Self.json(merged[key]!)
        }
        var line = JSONWriter.encode(.object(fields))
        line.append(UInt8(ascii: "\n"))
        // One write per line, so lines from different threads never interleave.
        line.withUnsafeBytes { _ = Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let items): .array(items.map(json))
        case .dictionary(let entries): .sortedObject(entries.mapValues(json))
        }
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))."
            + "\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }
}
