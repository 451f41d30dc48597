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
        var out: [UInt8] = []
        out.reserveCapacity(128 + response.headers.fields.count * 48 + (inlineBody?.count ?? 0))
        appendStatusLine(response.status, to: &out)
        out.append(contentsOf: "Date: ".utf8)
        out.append(contentsOf: date.utf8)
        out.append(contentsOf: "\r\nContent-Length: ".utf8)
        JSONWriter.writeDecimal(UInt64(contentLength ?? response.body.count), to: &out)
        out.append(contentsOf: keepAlive ? "\r\nConnection: keep-alive\r\n".utf8 : "\r\nConnection: close\r\n".utf8)
        for field in response.headers.fields {
            out.append(contentsOf: field.name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: field.value.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        out.append(contentsOf: "\r\n".utf8)
        if let inlineBody {
            out.append(contentsOf: inlineBody)
        }
        return out
    }

    private static func appendStatusLine(_ status: HTTPStatus, to out: inout [UInt8]) {
        out.append(contentsOf: "HTTP/1.1 ".utf8)
        JSONWriter.writeDecimal(UInt64(status.code), to: &out)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: status.reason.utf8)
        out.append(contentsOf: "\r\n".utf8)
    }
}
