import ReceptionistLoop
import ReceptionistSync
import ReceptionistWire

/// Writing a reply: its head and body in as few buffers as the body allows.
extension HTTPSession {
    func send(_ reply: Reply, headOnly: Bool, keepAlive: Bool) {
        let date = services.dateCache.current
        let length = reply.contentLength
        let result: TCPConnection.WriteResult
        if headOnly || length == 0 {
            result = write(
                SharedBytes(HTTPResponseEncoder.head(reply.response, date: date, keepAlive: keepAlive, contentLength: length)))
        } else if let shared = reply.sharedBody, length > HTTPResponseEncoder.inlineBodyLimit {
            // A large shared body goes out as its own buffer in the same writev, never copied.
            write(SharedBytes(HTTPResponseEncoder.head(reply.response, date: date, keepAlive: keepAlive, contentLength: length)))
            result = write(shared)
        } else {
            // Head and body written straight into the buffer that is sent.
            func whole(_ body: UnsafeRawBufferPointer) -> SharedBytes {
                let count = HTTPResponseEncoder.headCount(
                    reply.response, date: date, keepAlive: keepAlive, contentLength: length, inlineBody: body)
                return SharedBytes(count: count) { start in
                    _ = HTTPResponseEncoder.writeHead(
                        reply.response, date: date, keepAlive: keepAlive, contentLength: length, inlineBody: body, at: start)
                }
            }
            let bytes = reply.sharedBody.map { $0.withUnsafeBytes(whole) } ?? reply.response.body.withUnsafeBytes(whole)
            result = write(bytes)
        }
        // Policy for a full outbound queue: stop reading requests until the client catches up.
        if result == .backpressure {
            connection.stopReading()
        }
    }

    /// Hands `bytes` to the connection, counted (`written`) if it took them.
    @discardableResult
    func write(_ bytes: SharedBytes) -> TCPConnection.WriteResult {
        let result = connection.write(bytes)
        if result != .dropped { written &+= bytes.count }
        return result
    }
}
