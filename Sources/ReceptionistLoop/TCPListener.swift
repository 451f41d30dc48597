import CLibUV

/// A listening TCP socket that hands each accepted connection to `onConnection`.
///
/// Accept errors (such as running out of descriptors) are reported to `onAcceptError` and never
/// retried in a tight loop: libuv keeps a reserve descriptor to shed the pending connection.
///
/// Loop thread only.
public final class TCPListener: LoopHandle {
    public var onConnection: ((TCPConnection) -> Void)?
    public var onAcceptError: ((LoopError) -> Void)?
    public private(set) var localPort = 0

    var stream: UnsafeMutablePointer<uv_stream_t> { raw.assumingMemoryBound(to: uv_stream_t.self) }
    var tcp: UnsafeMutablePointer<uv_tcp_t> { raw.assumingMemoryBound(to: uv_tcp_t.self) }

    public init(loop: EventLoop, host: String, port: Int, backlog: Int32 = 1024) throws(LoopError) {
        super.init(loop: loop, type: UV_TCP)
        let status = uv_tcp_init(loop.raw, tcp)
        guard status == 0 else {
            discard()
            throw LoopError(code: status, operation: "uv_tcp_init")
        }
        adopt()
        do {
            var address = try SocketAddress.make(host: host, port: port)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_bind(tcp, $0, 0) }
            }
            try LoopError.check(bound, "bind \(host):\(port)")
            try LoopError.check(
                uv_listen(stream, backlog) { server, status in
                    guard let listener = LoopHandle.owner(UnsafeMutableRawPointer(server), as: TCPListener.self)
                    else { return }
                    listener.accept(status: status)
                }, "listen on \(host):\(port)")
            var local = sockaddr_storage()
            var length = Int32(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getsockname(tcp, $0, &length) }
            }
            localPort = SocketAddress.port(of: &local)
        } catch {
            close()
            throw error
        }
    }

    private func accept(status: Int32) {
        guard status == 0 else {
            onAcceptError?(LoopError(code: status, operation: "accept"))
            return
        }
        let connection = TCPConnection(loop: loop)
        let accepted = uv_accept(stream, connection.stream)
        guard accepted == 0 else {
            connection.close()
            onAcceptError?(LoopError(code: accepted, operation: "uv_accept"))
            return
        }
        uv_tcp_nodelay(connection.tcp, 1)
        if let onConnection {
            onConnection(connection)
        } else {
            connection.close()
        }
    }

    override func didClose() {
        onConnection = nil
        onAcceptError = nil
    }
}
