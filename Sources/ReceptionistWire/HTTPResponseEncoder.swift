import ReceptionistJSON

/// Encodes a response head, and small bodies with it, into one buffer.
public enum HTTPResponseEncoder {
    /// Bodies up to this size are copied after the head so the response is a single buffer;
    /// larger ones stay separate so a shared body is never copied.
    public static let inlineBodyLimit = 1024

    /// The head bytes for `response`, followed by `inlineBody` when given.
    ///
    /// - Parameters:
    ///   - date: the IMF-fixdate for the `Date` header (see `HTTPDate`).
    ///   - keepAlive: chooses `Connection: keep-alive` or `close`.
    ///   - contentLength: the body length to announce (HEAD answers carry the GET length, no body).
    public static func head(
        _ response: HTTPResponse, date: String, keepAlive: Bool, contentLength: Int? = nil,
        inlineBody: UnsafeRawBufferPointer? = nil
    ) -> [UInt8] {
        let size = headCount(response, date: date, keepAlive: keepAlive, contentLength: contentLength, inlineBody: inlineBody)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            count = writeHead(
                response, date: date, keepAlive: keepAlive, contentLength: contentLength, inlineBody: inlineBody,
                at: UnsafeMutableRawPointer(buffer.baseAddress!))
        }
    }

    /// How many bytes `head` makes with these arguments.
    public static func headCount(
        _ response: HTTPResponse, date: String, keepAlive: Bool, contentLength: Int? = nil,
        inlineBody: UnsafeRawBufferPointer? = nil
    ) -> Int {
        let length = UInt64(contentLength ?? response.body.count)
        var size = statusPrefix.utf8CodeUnitCount + JSONWriter.decimalCount(UInt64(response.status.code)) + 1
        size += response.status.reason.utf8.count + 2
        size += datePrefix.utf8CodeUnitCount + date.utf8.count
        if announcesLength(response.status) { size += lengthPrefix.utf8CodeUnitCount + JSONWriter.decimalCount(length) }
        size += connection(keepAlive).utf8CodeUnitCount + 2 + (inlineBody?.count ?? 0)
        for field in response.headers.fields { size += field.name.utf8.count + field.value.utf8.count + 4 }
        return size
    }

    /// Writes `head`'s bytes at `start`, which has room for `headCount` of them, and returns how
    /// many: a reply laid out in the buffer it is sent from, with no array in between.
    public static func writeHead(
        _ response: HTTPResponse, date: String, keepAlive: Bool, contentLength: Int? = nil,
        inlineBody: UnsafeRawBufferPointer? = nil, at start: UnsafeMutableRawPointer
    ) -> Int {
        let first = start.assumingMemoryBound(to: UInt8.self)
        var head = HeadWriter(at: first)
        head.write(statusPrefix)
        head.writeDecimal(UInt64(response.status.code))
        head.write(" ")
        head.copy(response.status.reason)
        head.write("\r\n")
        head.write(datePrefix)
        head.copy(date)
        if announcesLength(response.status) {
            head.write(lengthPrefix)
            head.writeDecimal(UInt64(contentLength ?? response.body.count))
        }
        head.write(connection(keepAlive))
        for field in response.headers.fields {
            head.copy(field.name)
            head.write(": ")
            head.copy(field.value)
            head.write("\r\n")
        }
        head.write("\r\n")
        if let inlineBody, inlineBody.count > 0 {
            head.next.update(from: inlineBody.baseAddress!.assumingMemoryBound(to: UInt8.self), count: inlineBody.count)
            head.next += inlineBody.count
        }
        return head.next - first
    }

    // Literals read through their pointers, with no lazy initialisation.
    private static var statusPrefix: StaticString { "HTTP/1.1 " }
    private static var datePrefix: StaticString { "Date: " }
    private static var lengthPrefix: StaticString { "\r\nContent-Length: " }

    /// Whether a response of `status` carries `Content-Length`: a 204 must not, and a 304 may
    /// only give the length of the 200 it stands for (RFC 9110, section 8.6), which it need not.
    private static func announcesLength(_ status: HTTPStatus) -> Bool {
        status.code != 204 && status.code != 304
    }

    private static func connection(_ keepAlive: Bool) -> StaticString {
        keepAlive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n"
    }

    /// Writes a head's pieces one after another into memory sized for them all.
    private struct HeadWriter {
        var next: UnsafeMutablePointer<UInt8>

        init(at start: UnsafeMutablePointer<UInt8>) { next = start }

        /// A literal, from the binary.
        mutating func write(_ text: StaticString) {
            next.update(from: text.utf8Start, count: text.utf8CodeUnitCount)
            next += text.utf8CodeUnitCount
        }

        /// A string's UTF-8 bytes.
        mutating func copy(_ text: String) {
            var text = text
            text.withUTF8 { bytes in
                guard let base = bytes.baseAddress else { return }
                next.update(from: base, count: bytes.count)
                next += bytes.count
            }
        }

        mutating func writeDecimal(_ value: UInt64) {
            next += JSONWriter.writeDecimal(value, at: next)
        }
    }
}
