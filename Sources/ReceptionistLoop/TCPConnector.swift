import CLibUV

/// Opens outbound TCP connections, for load generators that play the client.
///
/// The connection handed to `completion` is the same `TCPConnection` a listener accepts, with the
/// same corked writes, delegate and close lifecycle; the caller sets its delegate and starts reading.
///
/// Loop thread only.
public enum TCPConnector {
    /// Connects to `host:port`, first binding the socket to `sourceHost` (port chosen by the kernel)
    /// when one is given, so that many clients can spread over several loopback addresses.
    ///
    /// `completion` runs once on the loop thread: later from libuv's connect callback, or at once
    /// when the addresses cannot be parsed or the bind or connect is refused outright. On failure the
    /// connection is already closing and must not be used.
    public static func connect(
        loop: EventLoop, host: String, port: Int, sourceHost: String? = nil,
        completion: @escaping (Result<TCPConnection, LoopError>) -> Void
    ) {
        precondition(loop.isCurrent, "connect on the loop thread")
        let connection = TCPConnection(loop: loop)
        do {
            if let sourceHost {
                var local = try SocketAddress.make(host: sourceHost, port: 0)
                let bound = withUnsafePointer(to: &local) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_bind(connection.tcp, $0, 0) }
                }
                try LoopError.check(bound, "bind to \(sourceHost)")
            }
            var remote = try SocketAddress.make(host: host, port: port)
            let request = PendingConnect(connection: connection, completion: completion)
            try LoopError.check(request.submit(to: &remote), "connect to \(host):\(port)")
        } catch {
            connection.close()
            completion(.failure(error))
        }
    }

    /// One `uv_connect_t` in flight. It retains itself through the request's `data` until libuv's
    /// callback, which libuv always calls (with `UV_ECANCELED` if the handle is closed first), and
    /// always before the handle's close callback, so the connection is still valid there.
    private final class PendingConnect {
        let connection: TCPConnection
        let completion: (Result<TCPConnection, LoopError>) -> Void
        private let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)

        init(connection: TCPConnection, completion: @escaping (Result<TCPConnection, LoopError>) -> Void) {
            self.connection = connection
            self.completion = completion
        }

        deinit {
            request.deallocate()
        }

        func submit(to address: inout sockaddr_storage) -> Int32 {
            request.pointee.data = Unmanaged.passRetained(self).toOpaque()
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { remote in
                    uv_tcp_connect(request, connection.tcp, remote) { request, status in
                        guard let request, let data = request.pointee.data else { return }
                        let pending = Unmanaged<PendingConnect>.fromOpaque(data).takeRetainedValue()
                        request.pointee.data = nil
                        pending.finish(status: status)
                    }
                }
            }
            if status < 0 {
                Unmanaged<PendingConnect>.fromOpaque(request.pointee.data!).release()
                request.pointee.data = nil
            }
            return status
        }

        private func finish(status: Int32) {
            guard status == 0, connection.state == .open else {
                connection.close()
                completion(.failure(LoopError(code: status == 0 ? UV_ECANCELED.rawValue : status, operation: "connect")))
                return
            }
            // Small frames and requests go out at once, as on accepted sockets.
            uv_tcp_nodelay(connection.tcp, 1)
            completion(.success(connection))
        }
    }
}
