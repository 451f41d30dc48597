import ReceptionistSync

/// The publisher's POST, laid out once: each request is the fixed head and body around the
/// message's send time, written straight into the buffer that is sent. Built from strings for
/// every message, the request cost the publisher more than the server's whole publish, on the
/// core the clients share with Redis in `bench/cluster.sh`.
///
/// Pure value.
struct PublishRequest {
    /// Everything before the Content-Length's digits.
    private let head: [UInt8]
    /// The body before the stamp's digits, and after them (`Publisher.body()`'s layout).
    private let bodyStart: [UInt8] = Array(#"{"sentAt":"#.utf8)
    private let bodyEnd: [UInt8] = Array((#","text":""# + String(repeating: "x", count: 64) + #""}"#).utf8)

    private static let blankLine: [UInt8] = [13, 10, 13, 10]

    init(path: String, host: String, port: Int) {
        head = Array("POST \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nContent-Type: application/json\r\nContent-Length: ".utf8)
    }

    /// The request for a message stamped `sentAt` (microseconds since the epoch).
    func bytes(sentAt: UInt64) -> SharedBytes {
        let stampDigits = Self.digits(sentAt)
        let bodyCount = bodyStart.count + stampDigits + bodyEnd.count
        let lengthDigits = Self.digits(UInt64(bodyCount))
        return SharedBytes(count: head.count + lengthDigits + 4 + bodyCount) { start in
            var at = start
            func put(_ bytes: [UInt8]) {
                bytes.withUnsafeBytes { at.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                at += bytes.count
            }
            put(head)
            Self.write(UInt64(bodyCount), digits: lengthDigits, at: &at)
            put(Self.blankLine)
            put(bodyStart)
            Self.write(sentAt, digits: stampDigits, at: &at)
            put(bodyEnd)
        }
    }

    private static func digits(_ value: UInt64) -> Int {
        var count = 1
        var rest = value / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        return count
    }

    private static func write(_ value: UInt64, digits: Int, at: inout UnsafeMutableRawPointer) {
        var rest = value
        for index in stride(from: digits - 1, through: 0, by: -1) {
            (at + index).storeBytes(of: UInt8(48 + rest % 10), as: UInt8.self)
            rest /= 10
        }
        at += digits
    }
}
