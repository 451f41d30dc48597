import CLibUV
import Glibc

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
    /// `completion` runs once on the loop thread: later, when the connect is answered, or at once
    /// when the kernel connects at once, the addresses cannot be parsed, or the bind or connect
    /// is refused outright.
    public static func connect(
        loop: EventLoop, host: String, port: Int, sourceHost: String? = nil,
        completion: @escaping (Result<TCPConnection, LoopError>) -> Void
    ) {
        precondition(loop.isCurrent, "connect on the loop thread")
        var fd: Int32 = -1
        do {
            var remote = try SocketAddress.make(host: host, port: port)
            fd = Socket.open(family: remote.ss_family)
            try LoopError.check(fd, "socket")
            if let sourceHost {
                var local = try SocketAddress.make(host: sourceHost, port: 0)
                try LoopError.check(Socket.bind(fd, to: &local), "bind to \(sourceHost)")
            }
            let status = Socket.connect(fd, to: &remote)
            if status == -EINPROGRESS {
                let attempt = PendingConnect(loop: loop, fd: fd, completion: completion)
                fd = -1  // the attempt has it now
                try LoopError.check(attempt?.start() ?? UV_EEXIST.rawValue, "connect to \(host):\(port)")
                return
            }
            try LoopError.check(status, "connect to \(host):\(port)")
            let connected = fd
            fd = -1
            completion(Self.connection(loop: loop, fd: connected))
        } catch {
            if fd >= 0 { Socket.close(fd) }
            completion(.failure(error))
        }
    }

    private static func connection(loop: EventLoop, fd: Int32) -> Result<TCPConnection, LoopError> {
        guard let connection = TCPConnection(loop: loop, fd: fd) else {
            return .failure(LoopError(code: UV_EEXIST.rawValue, operation: "uv_poll_init_socket"))
        }
        return .success(connection)
    }

    /// A connect in progress: a poll on the socket until it turns writable, which is when the
    /// kernel has the answer. The socket then passes to a new `TCPConnection` and this handle
    /// closes without closing it.
    private final class PendingConnect: LoopHandle {
        private var completion: ((Result<TCPConnection, LoopError>) -> Void)?
        private var fd: Int32

        /// Nil (and `fd` closed) if libuv cannot watch the socket.
        init?(loop: EventLoop, fd: Int32, completion: @escaping (Result<TCPConnection, LoopError>) -> Void) {
            self.fd = fd
            self.completion = completion
            super.init(loop: loop, type: UV_POLL)
            guard adoptPoll(of: fd) == 0 else { return nil }
        }

        /// Starts watching; on failure the attempt is closed and `completion` is left to the caller.
        func start() -> Int32 {
            let status = uv_poll_start(poll, Int32(UV_WRITABLE.rawValue)) { handle, status, _ in
                guard let attempt = LoopHandle.owner(UnsafeMutableRawPointer(handle), as: PendingConnect.self)
                else { return }
                attempt.finish(status: status)
            }
            if status < 0 {
                completion = nil
                close()
            }
            return status
        }

        private func finish(status: Int32) {
            guard let completion else { return }
            self.completion = nil
            let error = status < 0 ? status : Socket.pendingError(fd)
            guard error == 0 else {
                close()
                completion(.failure(LoopError(code: error, operation: "connect")))
                return
            }
            // The poll stops watching before the socket is watched again, by the connection.
            uv_poll_stop(poll)
            let connected = fd
            fd = -1
            close()
            completion(TCPConnector.connection(loop: loop, fd: connected))
        }

        override func willClose() {
            uv_poll_stop(poll)
            if fd >= 0 {
                Socket.close(fd)
                fd = -1
            }
            if let completion {
                self.completion = nil
                completion(.failure(LoopError(code: UV_ECANCELED.rawValue, operation: "connect")))
            }
        }
    }
}
