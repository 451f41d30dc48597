import ReceptionistLoop

/// What a `StreamReader` hands what it reads to: a topic's mirror or a store's replica.
///
/// Loop thread only.
protocol StreamFollower: AnyObject {
    /// Whether the follower takes more entries now; one that is behind calls
    /// `reader.followerCaughtUp()` when it is ready again, and the reader reads then.
    var acceptsMore: Bool { get }
    /// Entries read after the cursor, in stream order; judge each with `reader.cursor`.
    func follow(_ entries: [StreamEntry], reader: StreamReader)
    /// The reader has read everything the stream held when it asked.
    func caughtUp(_ reader: StreamReader)
    /// Redis could not be asked; what follows comes with the catch-up after reconnection.
    func unreachable(_ reader: StreamReader)
    /// The reader has no cursor: read the whole state, and call `done` with the cursor to go on
    /// from (nil if it could not be read).
    func resync(_ reader: StreamReader, done: @escaping (StreamCursor?) -> Void)
}

/// One Redis stream this node follows, for topics and stores alike: `XREAD` from the last entry
/// ID, at most `batch` entries at a time, one read in flight. A read asked for while one is in
/// flight is remembered and made when it ends, so a notice is never lost, and a full batch is
/// followed by another at once.
///
/// Loop thread only.
final class StreamReader {
    static let batch = 512

    let key: String
    /// Nil until the follower has read the whole state, and again whenever it must.
    var cursor: StreamCursor?
    /// `XREAD COUNT <batch> STREAMS <key>`, laid out once, with room for an entry ID: each read
    /// copies it and appends the ID it reads after (laid out anew, it cost a read about 1,200
    /// instructions, one message's read when messages come one at a time).
    private let readCommand: RedisArguments
    private unowned let commands: RedisConnection
    private let follower: any StreamFollower
    private var reading = false
    private var again = false
    /// A read Redis's connection had no room for (`--redis-max-pending` commands waiting, as
    /// when a reconnection re-reads every stream at once): handed to `retry` once, which reads
    /// again once there is room and clears this. Dropped, the stream stayed behind until its next
    /// notice, maybe never.
    var waitsForRoom = false
    private let retry: (StreamReader) -> Void

    init(
        key: String, cursor: StreamCursor?, commands: RedisConnection, follower: any StreamFollower,
        retry: @escaping (StreamReader) -> Void
    ) {
        self.key = key
        self.cursor = cursor
        var command = RedisArguments(command: "XREAD", arguments: 5, capacity: 112 + key.utf8.count)
        command.append("COUNT")
        command.append(Self.batch)
        command.append("STREAMS")
        command.append(key)
        readCommand = command
        self.commands = commands
        self.follower = follower
        self.retry = retry
    }

    /// Whether no read is in flight or held back.
    var isIdle: Bool { !reading && !again && !waitsForRoom }

    func read() {
        // A read asked for while one is in flight, or while the follower is behind, is kept for
        // later: the queue between Redis and the follower never grows past what it accepts.
        guard !reading, follower.acceptsMore else { again = true; return }
        again = false
        reading = true
        guard let cursor else {
            return follower.resync(self) { [self] cursor in
                reading = false
                guard let cursor else { return }
                self.cursor = cursor
                read()
            }
        }
        var command = readCommand
        command.append(cursor.lastID)
        let sent = commands.send(command: command.bytes, viewing: { [self] reply in
            reading = false
            guard let reply else { return }  // the connection dropped; the catch-up reads again
            // Read in place: only the entries' own fields are copied.
            let entries = StreamEntry.parse(xread: reply)
            follower.follow(entries, reader: self)
            if self.cursor == nil || entries.count >= Self.batch || again {
                read()
            } else {
                follower.caughtUp(self)
            }
        })
        if !sent {
            reading = false
            // Connected but full: read again when there is room. Not connected: the catch-up
            // after reconnection reads every stream.
            if commands.isConnected, !waitsForRoom {
                waitsForRoom = true
                retry(self)
            }
            follower.unreachable(self)
        }
    }

    /// The follower could not read the whole state now (Redis's connection or the replica thread
    /// full): read again at the next heartbeats, as a refused `XREAD` is. Dropped, the store was
    /// missing or stale on this node until its next notice, maybe never.
    func readLater() {
        guard cursor == nil, commands.isConnected, !waitsForRoom else { return }
        waitsForRoom = true
        retry(self)
    }

    /// The follower has room again: make the read that was held back, if any.
    func followerCaughtUp() {
        if again { read() }
    }
}
