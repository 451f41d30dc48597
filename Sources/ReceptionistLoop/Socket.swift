import CLibUV
import Glibc

/// The socket calls the loop's TCP handles make themselves.
///
/// libuv watches each descriptor (`uv_poll_t`: 160 bytes, against a `uv_tcp_t`'s 248 that also
/// holds stream state we keep in `TCPConnection` anyway); accepting, connecting, reading and
/// writing are these calls. On Linux a poll handle is the same epoll registration a libuv stream
/// uses, so nothing is lost in scalability.
///
/// Each call answers as libuv does: a count or descriptor, or a negative errno, which `LoopError`
/// names. Interrupted calls are retried.
enum Socket {
    /// A non-blocking, close-on-exec stream socket of `family`.
    static func open(family: sa_family_t) -> Int32 {
        let fd = socket(Int32(family), Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        return fd >= 0 ? fd : -errno
    }

    /// The next pending connection of a listening socket, non-blocking and close-on-exec.
    static func accept(_ listener: Int32) -> Int32 {
        while true {
            let fd = accept4(listener, nil, nil, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue))
            if fd >= 0 { return fd }
            if errno != EINTR { return -errno }
        }
    }

    static func bind(_ fd: Int32, to address: inout sockaddr_storage) -> Int32 {
        let length = addressLength(address)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        return status == 0 ? 0 : -errno
    }

    /// 0 when connected at once, `-EINPROGRESS` when the answer comes later (the socket turns
    /// writable), or another negative errno.
    static func connect(_ fd: Int32, to address: inout sockaddr_storage) -> Int32 {
        let length = addressLength(address)
        while true {
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
            }
            if status == 0 { return 0 }
            if errno != EINTR { return -errno }
        }
    }

    static func listen(_ fd: Int32, backlog: Int32) -> Int32 {
        Glibc.listen(fd, backlog) == 0 ? 0 : -errno
    }

    /// Bytes read into `buffer` (0 at end of stream), or a negative errno.
    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        while true {
            let read = recv(fd, buffer, count, 0)
            if read >= 0 { return read }
            if errno != EINTR { return Int(-errno) }
        }
    }

    /// Bytes the kernel took from `vectors`, in order, or a negative errno. Never raises SIGPIPE:
    /// a peer that has gone is an error answered here, whatever the process does with the signal.
    static func send(_ fd: Int32, _ vectors: UnsafeMutablePointer<iovec>, count: Int) -> Int {
        var message = msghdr()
        message.msg_iov = vectors
        message.msg_iovlen = count
        while true {
            let sent = sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
            if sent >= 0 { return sent }
            if errno != EINTR { return Int(-errno) }
        }
    }

    static func shutDownWrites(_ fd: Int32) -> Int32 {
        shutdown(fd, Int32(SHUT_WR)) == 0 ? 0 : -errno
    }

    /// Bytes the kernel holds to send, not yet acknowledged by the peer (`SIOCOUTQ`); 0 if it
    /// cannot tell.
    static func unsentBytes(_ fd: Int32) -> Int {
        var value: Int32 = 0
        // SIOCOUTQ is TIOCOUTQ on Linux.
        return ioctl(fd, UInt(TIOCOUTQ), &value) == 0 ? Int(max(0, value)) : 0
    }

    static func close(_ fd: Int32) {
        // Linux releases the descriptor even when close reports EINTR: never retry.
        _ = Glibc.close(fd)
    }

    static func setOption(_ fd: Int32, level: Int32, name: Int32, to value: Int32) {
        var value = value
        _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Small frames and replies go out at once.
    static func setNoDelay(_ fd: Int32) {
        setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, to: 1)
    }

    /// A connection to a server this process depends on (Redis) notices a dead peer or path by
    /// itself: probes after `idleSeconds` of quiet, every third of that, three times; and data
    /// unacknowledged for `unackedMilliseconds` ends it. Without them a host gone or a flow a
    /// firewall dropped held the connection for the kernel's 15 minutes of retransmissions.
    static func setDeadPeerDetection(_ fd: Int32, idleSeconds: Int32, unackedMilliseconds: Int32) {
        setOption(fd, level: SOL_SOCKET, name: SO_KEEPALIVE, to: 1)
        setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_KEEPIDLE, to: idleSeconds)
        setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_KEEPINTVL, to: max(1, idleSeconds / 3))
        setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_KEEPCNT, to: 3)
        setOption(fd, level: Int32(IPPROTO_TCP), name: tcpUserTimeout, to: unackedMilliseconds)
    }

    /// `TCP_USER_TIMEOUT` (linux/tcp.h), which Glibc's module does not export.
    static let tcpUserTimeout: Int32 = 18

    /// An integer option's value, or nil if it cannot be read.
    static func option(_ fd: Int32, level: Int32, name: Int32) -> Int32? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, level, name, &value, &length) == 0 ? value : nil
    }

    /// The error a non-blocking connect ended with, as a negative errno; 0 if it succeeded.
    static func pendingError(_ fd: Int32) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else { return -errno }
        return -value
    }

    static func localAddress(_ fd: Int32) -> sockaddr_storage? {
        address(fd, getsockname)
    }

    static func peerAddress(_ fd: Int32) -> sockaddr_storage? {
        address(fd, getpeername)
    }

    private static func address(
        _ fd: Int32,
        _ call: (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?) -> Int32
    ) -> sockaddr_storage? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) }
        }
        return status == 0 ? storage : nil
    }

    private static func addressLength(_ address: sockaddr_storage) -> socklen_t {
        socklen_t(Int32(address.ss_family) == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
    }
}
