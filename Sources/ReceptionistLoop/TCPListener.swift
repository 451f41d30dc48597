import CLibUV
import Glibc

/// A listening TCP socket that hands each accepted connection to `onConnection`.
///
/// Accept errors are reported to `onAcceptError` and never retried in a tight loop. Out of
/// descriptors, the listener gives back a reserve descriptor it holds, accepts and closes every
/// pending connection (so their peers learn at once rather than wait in the backlog), and takes
/// the reserve again; the loop then sleeps until the next connection arrives.
///
/// Loop thread only.
public final class TCPListener: LoopHandle {
    public var onConnection: ((TCPConnection) -> Void)?
    public var onAcceptError: ((LoopError) -> Void)?
    /// Called with how many pending connections were shed for want of descriptors.
    public var onShed: ((Int) -> Void)?
    /// Written to each shed connection before it is closed, as far as its socket takes it at once
    /// (a refusal its peer can read, rather than a reset).
    public var shedReply: [UInt8] = []
    public private(set) var localPort = 0
    /// The descriptor given back to shed connections when the process has none left.
    private var reserve: Int32 = -1
    /// Starts accepting again after a `pause`.
    private var resumeTimer: LoopTimer?

    public init(loop: EventLoop, host: String, port: Int, backlog: Int32 = 1024) throws(LoopError) {
        super.init(loop: loop, type: UV_POLL)
        var address: sockaddr_storage
        do {
            address = try SocketAddress.make(host: host, port: port)
        } catch {
            discard()
            throw error
        }
        let fd = Socket.open(family: address.ss_family)
        guard fd >= 0 else {
            discard()
            throw LoopError(code: fd, operation: "socket")
        }
        let status = adoptPoll(of: fd)
        guard status == 0 else { throw LoopError(code: status, operation: "uv_poll_init_socket") }
        do {
            // As libuv's own listeners do: a restarted server can bind while old connections linger.
            Socket.setOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, to: 1)
            try LoopError.check(Socket.bind(fd, to: &address), "bind \(host):\(port)")
            try LoopError.check(Socket.listen(fd, backlog: backlog), "listen on \(host):\(port)")
            if var local = Socket.localAddress(fd) {
                localPort = SocketAddress.port(of: &local)
            }
            reserve = Self.openReserve()
            try LoopError.check(uv_poll_start(poll, Int32(UV_READABLE.rawValue), Self.readable), "watch \(host):\(port)")
        } catch {
            close()
            throw error
        }
    }

    /// At most this many connections are taken per wake-up, so that a burst of connections shares
    /// the loop with the traffic of those already open; the poll is level-triggered and brings the
    /// rest in the next iteration.
    static let acceptsPerWake = 128
    /// How long accepting pauses when descriptors run out and none can be freed to shed the
    /// pending connections: the level-triggered poll would otherwise wake the loop at once, again
    /// and again, until one is freed.
    static let pauseMilliseconds: UInt64 = 100

    private static let readable: uv_poll_cb = { handle, status, _ in
        guard let listener = LoopHandle.owner(UnsafeMutableRawPointer(handle), as: TCPListener.self) else { return }
        listener.acceptPending(status: status)
    }

    /// Stops accepting for `pauseMilliseconds`.
    private func pause() {
        uv_poll_stop(poll)
        let timer = resumeTimer ?? LoopTimer(loop: loop) { [weak self] in
            guard let self, !self.isClosing else { return }
            uv_poll_start(self.poll, Int32(UV_READABLE.rawValue), Self.readable)
        }
        resumeTimer = timer
        timer.start(delayMilliseconds: Self.pauseMilliseconds)
    }

    private func acceptPending(status: Int32) {
        guard status == 0 else {
            onAcceptError?(LoopError(code: status, operation: "accept"))
            return
        }
        let listening = fileDescriptor
        for _ in 0..<Self.acceptsPerWake {
            guard !isClosing else { return }
            let fd = Socket.accept(listening)
            if fd >= 0 {
                hand(fd)
                continue
            }
            switch -fd {
            case EAGAIN, EWOULDBLOCK:
                return
            case ECONNABORTED:
                continue
            case EMFILE, ENFILE:
                // Shed what is pending; report only if that could not empty the backlog.
                let (ended, shed) = shedPending(listening)
                if shed > 0 { onShed?(shed) }
                if ended != -EAGAIN && ended != -EWOULDBLOCK {
                    onAcceptError?(LoopError(code: fd, operation: "accept"))
                    // Nothing could be shed: no reserve to give back (another thread took the
                    // one given last time). Not spun on; taken again once one is free.
                    if shed == 0 {
                        if reserve < 0 { reserve = Self.openReserve() }
                        pause()
                    }
                }
                return
            default:
                onAcceptError?(LoopError(code: fd, operation: "accept"))
                return
            }
        }
    }

    private func hand(_ fd: Int32) {
        guard let connection = TCPConnection(loop: loop, fd: fd) else {
            onAcceptError?(LoopError(code: UV_EEXIST.rawValue, operation: "uv_poll_init_socket"))
            return
        }
        if let onConnection {
            onConnection(connection)
        } else {
            connection.close()
        }
    }

    /// Gives back the reserve descriptor, accepts every pending connection, writes `shedReply` to
    /// it and closes it, and takes the reserve again. Answers the error that ended the accepting
    /// (`-EAGAIN` once the backlog is empty, or `-EMFILE` if there was no reserve to give) and how
    /// many connections were shed.
    private func shedPending(_ listening: Int32) -> (ended: Int32, shed: Int) {
        guard reserve >= 0 else { return (-EMFILE, 0) }
        Socket.close(reserve)
        reserve = -1
        var fd: Int32
        var shed = 0
        // At most a wake's worth: a flood of connections shares the loop with the others, and
        // the level-triggered poll brings the rest next time.
        repeat {
            fd = Socket.accept(listening)
            if fd >= 0 {
                shed += 1
                refuse(fd)
            }
        } while (fd >= 0 || fd == -ECONNABORTED) && shed < Self.acceptsPerWake
        reserve = Self.openReserve()
        return (fd >= 0 ? -EAGAIN : fd, shed)
    }

    /// Writes `shedReply` to a shed connection and closes it. What its peer sent already is read
    /// and dropped before the close (a little, without waiting): a socket closed with bytes unread
    /// is reset, and the reset drops the reply on its way.
    private func refuse(_ fd: Int32) {
        if !shedReply.isEmpty {
            _ = shedReply.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) { scratch in
                for _ in 0..<16 where Glibc.recv(fd, scratch.baseAddress, scratch.count, Int32(MSG_DONTWAIT)) <= 0 { break }
            }
            _ = Socket.shutDownWrites(fd)
        }
        Socket.close(fd)
    }

    private static func openReserve() -> Int32 {
        open("/", O_RDONLY | O_CLOEXEC)
    }

    override func willClose() {
        let fd = fileDescriptor
        uv_poll_stop(poll)
        resumeTimer?.close()
        resumeTimer = nil
        if fd >= 0 { Socket.close(fd) }
        if reserve >= 0 {
            Socket.close(reserve)
            reserve = -1
        }
    }

    override func didClose() {
        onConnection = nil
        onAcceptError = nil
    }
}
