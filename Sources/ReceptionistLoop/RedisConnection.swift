import CHiredis
import Glibc

/// One connection to Redis through hiredis's asynchronous API, driven by the loop it was made on:
/// commands with reply callbacks, pub/sub, and reconnection with backoff.
///
/// Lifecycle invariant (the same as `LoopHandle`'s): while hiredis holds a context, its `data`
/// holds a retained reference to this connection, released in the one callback after which hiredis
/// frees the context (a failed connect, or a disconnect). A reply callback's box is retained
/// through its `privdata` until hiredis calls it, which it does exactly once, with no reply when
/// the connection is lost. So no callback can reach freed memory.
///
/// Subscriptions do not survive a reconnection: the owner re-issues them from `onConnected`.
///
/// Loop thread only.
public final class RedisConnection {
    public enum State: Sendable, Equatable {
        case disconnected, connecting, connected, closed
    }

    public let endpoint: RedisEndpoint
    /// For logs: what this connection is for.
    public let name: String
    public unowned let loop: EventLoop
    public private(set) var state: State = .disconnected
    /// The reason of the last failure, for readiness and logs.
    public private(set) var lastError: String?
    /// Commands sent whose replies have not come back. Past `maxPendingCommands` a command is
    /// refused at once (`send` returns false), so a slow Redis cannot grow this queue without bound.
    public internal(set) var pendingCommands = 0
    public var maxPendingCommands = 100_000

    /// What the owner has set up on the current connection, and must set up again on the next
    /// (the scripts Redis has been sent whole, say): emptied each time a connection is begun. A
    /// few names, looked up in turn: a name held in one `static let` is the same string each time,
    /// found without hashing or comparing its bytes.
    public var established: [String] = []

    /// Called each time a connection is established (and `AUTH`/`SELECT` are queued).
    public var onConnected: (() -> Void)?
    /// Called when a connection is lost or an attempt fails; a retry is already scheduled.
    public var onDisconnected: ((String) -> Void)?

    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var backoff: RedisBackoff
    private var retryTimer: LoopTimer?
    /// After `close`, frees a connection whose server still owes replies (`closeTimeoutMilliseconds`).
    private var closeTimer: LoopTimer?
    /// A close asked from inside a reply callback, done at the loop's next turn.
    private var deferredClose: LoopTimer?
    /// How long `close` waits for the replies still owed before it drops the connection: hiredis
    /// disconnects only once every reply has come, and a server that stopped answering would
    /// hold the connection, and the loop with it, for good.
    public static let closeTimeoutMilliseconds: UInt64 = 2000
    /// Pub/sub callbacks live as long as the context; hiredis calls them once per message.
    private var subscriptionBoxes: [ReplyBox] = []
    /// Commands are queued in hiredis's buffer; the loop writes them once, at the end of the
    /// iteration that queued them (pipelined), instead of waiting a poll for the socket.
    private var flushScheduled = false
    /// Why the owner dropped the connection (`drop`), reported in its place.
    private var dropReason: String?

    public init(loop: EventLoop, endpoint: RedisEndpoint, name: String, backoff: RedisBackoff = RedisBackoff()) {
        precondition(loop.isCurrent)
        self.loop = loop
        self.endpoint = endpoint
        self.name = name
        self.backoff = backoff
    }

    public var isConnected: Bool { state == .connected }

    /// Quiet this long, the connection is probed: a host gone is found within about twice it.
    public static let keepAliveIdleSeconds: Int32 = 15
    /// Commands unacknowledged this long end the connection (their replies come as nothing).
    public static let unackedMilliseconds: Int32 = 30_000

    /// The socket's keep-alive idle time and unacknowledged-data limit, as the kernel has them;
    /// nil when not connected.
    public var deadPeerSettings: (keepAliveIdleSeconds: Int32, unackedMilliseconds: Int32)? {
        guard let context, state == .connected else { return nil }
        let fd = context.pointee.c.fd
        guard Socket.option(fd, level: SOL_SOCKET, name: SO_KEEPALIVE) == 1,
              let idle = Socket.option(fd, level: Int32(IPPROTO_TCP), name: TCP_KEEPIDLE),
              let unacked = Socket.option(fd, level: Int32(IPPROTO_TCP), name: Socket.tcpUserTimeout)
        else { return nil }
        return (idle, unacked)
    }

    /// Starts connecting; reconnects by itself until `close`.
    public func start() {
        precondition(loop.isCurrent)
        connect()
    }

    /// Queues a command. Returns false (and never calls `reply`) when there is no connection or
    /// `maxPendingCommands` replies are already owed; otherwise `reply` runs once on the loop
    /// thread, with nil if the connection is lost first.
    @discardableResult
    public func send(_ arguments: [String], reply: @escaping (RedisReply?) -> Void) -> Bool {
        send(command: RedisArguments(arguments).command(), reply: reply)
    }

    /// As `send(_:reply:)`, with binary-safe arguments.
    @discardableResult
    public func send(_ arguments: [[UInt8]], reply: @escaping (RedisReply?) -> Void) -> Bool {
        send(command: RedisArguments(arguments).command(), reply: reply)
    }

    /// As `send(_:reply:)`, with the command laid out whole (`RedisArguments.command`): hiredis
    /// copies it as it is, formatting nothing.
    @discardableResult
    public func send(command: [UInt8], reply: @escaping (RedisReply?) -> Void) -> Bool {
        queue(command) { reply($0?.copied) }
    }

    /// As `send(command:reply:)`, with the reply read in place: `reply` must take what it needs
    /// from the view before it returns, and keep nothing of it (a reply read back for every
    /// message is then not copied whole first).
    @discardableResult
    public func send(command: [UInt8], viewing reply: @escaping (RedisReplyView?) -> Void) -> Bool {
        queue(command, answer: reply)
    }

    /// Queues `command`; `answer` runs once, with nil if the connection is lost first, and the
    /// reply is no longer owed from then on.
    private func queue(_ command: [UInt8], answer: @escaping (RedisReplyView?) -> Void) -> Bool {
        precondition(loop.isCurrent)
        guard let context, state == .connected || state == .connecting, !isSaturated else { return false }
        pendingCommands += 1
        let box = Unmanaged.passRetained(ReplyBox(owedTo: self, answer))
        let status = Self.queue(command, on: context, box.toOpaque()) { _, reply, privdata in
            guard let privdata else { return }
            // Consumed: hiredis calls this once.
            Unmanaged<ReplyBox>.fromOpaque(privdata).takeRetainedValue().answer(reply)
        }
        if status != REDIS_OK {
            pendingCommands -= 1
            box.release()
            return false
        }
        scheduleFlush()
        return true
    }

    /// A connected context's commands are written only by `flush`, at the end of this iteration.
    private func scheduleFlush() {
        if !flushScheduled && state == .connected {
            flushScheduled = true
            loop.scheduleFlush(self)
        }
    }

    /// Writes what this iteration has queued now, not at the iteration's end.
    public func flushNow() {
        if flushScheduled { flush() }
    }

    /// Whether `maxPendingCommands` replies are owed already.
    public var isSaturated: Bool { pendingCommands >= maxPendingCommands }

    /// Subscribes to `channels` in one command, so Redis takes them all at once; `message` runs for
    /// every message published on any of them, until the connection is lost. `subscribed` runs once,
    /// when Redis has confirmed the last. Returns false when not connected.
    @discardableResult
    public func subscribe(_ channels: [String], subscribed: @escaping () -> Void, message: @escaping ([UInt8]) -> Void) -> Bool {
        precondition(loop.isCurrent)
        precondition(!channels.isEmpty, "a subscription names a channel")
        // Connected only: a connect that fails frees the context after `contextFreed` let go of
        // the boxes its callbacks would be handed.
        guard let context, state == .connected else { return false }
        var unconfirmed = channels.count
        let box = ReplyBox(owedTo: nil) { reply in
            guard let parts = reply?.elements, parts.count >= 3 else { return }
            if parts[0].isBulk("message"), let payload = parts[2].bytes {
                message(payload)
            } else if parts[0].isBulk("subscribe") {
                unconfirmed -= 1
                if unconfirmed == 0 { subscribed() }
            }
        }
        var arguments = RedisArguments()
        for channel in channels { arguments.append(channel) }
        let status = Self.queue(arguments.command("SUBSCRIBE"), on: context, Unmanaged.passUnretained(box).toOpaque()) {
            _, reply, privdata in
            guard let privdata else { return }
            // Not consumed: hiredis calls this for every message. `subscriptionBoxes` owns it.
            Unmanaged<ReplyBox>.fromOpaque(privdata).takeUnretainedValue().answer(reply)
        }
        guard status == REDIS_OK else { return false }
        subscriptionBoxes.append(box)
        scheduleFlush()
        return true
    }

    /// Drops a connection the owner found dead (it carries nothing back, though the kernel keeps
    /// it open): every reply owed is answered with nothing, and it reconnects with backoff.
    public func drop(because reason: String) {
        precondition(loop.isCurrent)
        // Only a connected context reaches the disconnect callback, which schedules the retry.
        guard state == .connected, let context else { return }
        dropReason = reason
        redisAsyncFree(context)
    }

    /// Disconnects for good (after replies already due) and stops reconnecting. Idempotent.
    public func close() {
        precondition(loop.isCurrent)
        guard state != .closed else { return }
        // From inside a reply callback this iteration's commands cannot be written yet (see
        // `flush`): the close waits for the loop's next turn, when they have been.
        if state == .connected, let context, Self.inCallback(context) {
            if deferredClose == nil { deferredClose = LoopTimer(loop: loop) { [weak self] in self?.close() } }
            return deferredClose!.start(delayMilliseconds: 0)
        }
        deferredClose?.close()
        deferredClose = nil
        let wasConnected = state == .connected
        state = .closed
        retryTimer?.close()
        retryTimer = nil
        if var context {
            // Still connecting: nothing is on its way to wait for. hiredis calls no callback when
            // it frees a context that never connected, so its hold on this connection goes here.
            guard wasConnected else {
                let data = context.pointee.data
                redisAsyncFree(context)
                if let data { Unmanaged<RedisConnection>.fromOpaque(data).release() }
                return contextFreed("closed")
            }
            // Commands of this iteration not written yet go out first: their replies are due.
            // A write that fails frees the context.
            receptionist_redis_flush(context)
            guard let still = self.context else { return }
            context = still
            redisAsyncDisconnect(context)
            // Still here: replies are owed. Past the time-out hiredis frees the context, answering
            // each of them with nothing, and calls the disconnect callback.
            if self.context != nil {
                let timer = LoopTimer(loop: loop) { [weak self] in
                    guard let self else { return }
                    closeTimer?.close()
                    closeTimer = nil
                    if let context = self.context { redisAsyncFree(context) }
                }
                closeTimer = timer
                timer.start(delayMilliseconds: Self.closeTimeoutMilliseconds)
            }
        }
    }

    // MARK: Connecting

    /// Looks the host up off the loop (`HostResolver`), then connects to its address.
    private func connect() {
        guard state == .disconnected else { return }
        state = .connecting
        HostResolver.resolve(endpoint.host, on: loop) { [weak self] answer in
            // Closed meanwhile: nothing to connect.
            guard let self, state == .connecting, context == nil else { return }
            switch answer {
            case .success(let address): open(address)
            case .failure(let error): failed(error.description)
            }
        }
    }

    private func open(_ address: String) {
        guard let context = redisAsyncConnect(address, Int32(endpoint.port)) else {
            failed("cannot allocate a Redis context")
            return
        }
        if context.pointee.err != 0 {
            let reason = String(cString: receptionist_redis_errstr(context))
            redisAsyncFree(context)
            failed(reason)
            return
        }
        guard receptionist_redis_attach(context, UnsafeMutableRawPointer(loop.raw)) == REDIS_OK else {
            // The adapter's clean-up may only run once its poll handle exists; otherwise the
            // context is leaked rather than freed through a clean-up that would crash.
            if receptionist_redis_is_attached(context) != 0 { redisAsyncFree(context) }
            failed("cannot attach the Redis connection to the loop")
            return
        }
        Socket.setDeadPeerDetection(context.pointee.c.fd, idleSeconds: Self.keepAliveIdleSeconds, unackedMilliseconds: Self.unackedMilliseconds)
        context.pointee.data = Unmanaged.passRetained(self).toOpaque()
        redisAsyncSetConnectCallback(context) { context, status in
            guard let context, let data = context.pointee.data else { return }
            if status == REDIS_OK {
                Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue().didConnect()
            } else {
                // hiredis frees the context after this callback: drop our reference now.
                let reason = String(cString: receptionist_redis_errstr(context))
                let connection = Unmanaged<RedisConnection>.fromOpaque(data).takeRetainedValue()
                connection.contextFreed(reason)
            }
        }
        redisAsyncSetDisconnectCallback(context) { context, status in
            guard let context, let data = context.pointee.data else { return }
            let reason = status == REDIS_OK ? "disconnected" : String(cString: receptionist_redis_errstr(context))
            let connection = Unmanaged<RedisConnection>.fromOpaque(data).takeRetainedValue()
            connection.contextFreed(reason)
        }
        self.context = context
        state = .connecting
        established = []
        // Queued now, sent first once the socket connects.
        if let password = endpoint.password {
            let auth = endpoint.user.map { ["AUTH", $0, password] } ?? ["AUTH", password]
            send(auth) { [weak self] reply in
                if case .error(let text)? = reply { self?.lastError = "AUTH: \(text)" }
            }
        }
        if endpoint.database != 0 {
            send(["SELECT", String(endpoint.database)]) { [weak self] reply in
                if case .error(let text)? = reply { self?.lastError = "SELECT: \(text)" }
            }
        }
    }

    private func didConnect() {
        guard state == .connecting else { return }
        state = .connected
        lastError = nil
        backoff.reset()
        onConnected?()
    }

    /// hiredis is about to free the context: forget it, and retry unless closed.
    private func contextFreed(_ reason: String) {
        context = nil
        subscriptionBoxes.removeAll()
        closeTimer?.close()
        closeTimer = nil
        if state == .closed { return }
        failed(dropReason ?? reason)
        dropReason = nil
    }

    private func failed(_ reason: String) {
        state = .disconnected
        lastError = reason
        let delay = backoff.nextDelayMilliseconds()
        let timer = retryTimer ?? LoopTimer(loop: loop) { [weak self] in self?.connect() }
        retryTimer = timer
        timer.start(delayMilliseconds: delay)
        onDisconnected?(reason)
    }

    // MARK: C boundary

    /// Hands hiredis a command laid out whole (`RedisArguments.command`), which it copies into
    /// its output buffer as it is; `callback` gets `privdata` with each reply.
    private static func queue(
        _ command: [UInt8], on context: UnsafeMutablePointer<redisAsyncContext>, _ privdata: UnsafeMutableRawPointer,
        _ callback: @convention(c) (UnsafeMutablePointer<redisAsyncContext>?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void
    ) -> Int32 {
        let terminated = handedOver(command)
        return terminated.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) {
                redisAsyncFormattedCommand(context, callback, privdata, $0.baseAddress, $0.count - 1)
            }
        }
    }

    /// `command` as hiredis is handed it: followed by a NUL that is not sent. hiredis reads a
    /// command's arguments with `strchr` to find what it subscribes to, and past its last one:
    /// without the NUL it read on through the heap after the buffer, took what it found there for
    /// more channels, and could abort the process on a `SUBSCRIBE` sent again at a reconnection.
    static func handedOver(_ command: [UInt8]) -> [UInt8] {
        var terminated: [UInt8] = []
        terminated.reserveCapacity(command.count + 1)
        terminated.append(contentsOf: command)
        terminated.append(0)
        return terminated
    }
}

extension RedisConnection: LoopFlushable {
    /// Writes every command queued this iteration in one go; what the socket does not take now
    /// hiredis writes when it is writable. A connected context's commands are written only here
    /// (`receptionist_redis_flush`), so every `send` while connected schedules this.
    func flush() {
        flushScheduled = false
        guard let context, state == .connected else { return }
        // Inside one of the context's reply callbacks (`flushNow` from an answer) a write that
        // fails would free the context while hiredis goes on using it: left to the iteration's end.
        if Self.inCallback(context) { return scheduleFlush() }
        receptionist_redis_flush(context)
    }

    private static func inCallback(_ context: UnsafeMutablePointer<redisAsyncContext>) -> Bool {
        context.pointee.c.flags & REDIS_IN_CALLBACK != 0
    }
}
