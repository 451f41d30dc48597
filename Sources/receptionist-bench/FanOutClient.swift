import ReceptionistLoop
import ReceptionistWire
import ReceptionistModel

/// One WebSocket subscriber: the opening handshake, one subscription (with its group's options),
/// then every server frame decoded, and each delivery counted with its bytes and timed against
/// the commit or publish time it carries.
///
/// Loop thread only.
final class FanOutClient: TCPConnectionDelegate {
    private enum Stage {
        case handshaking, subscribing, subscribed, done
    }

    private unowned let run: FanOutRun
    private let connection: TCPConnection
    /// Which of the run's option sets this subscriber uses.
    private let group: Int
    private var stage = Stage.handshaking
    private var handshake: ClientHandshake
    private var reader: FrameReader
    /// When the subscribe was sent, in microseconds since the Unix epoch.
    private var subscribeSentAt: Int64 = 0
    /// With `since`: the version this subscriber holds, which the next `changes` frame must follow.
    private var position: Int64?
    /// With `since`: answered `subscribed`, and no `changes` frame seen yet.
    private var awaitsFirstChange = false

    init(connection: TCPConnection, run: FanOutRun, group: Int, inflates: Bool = true) {
        self.connection = connection
        self.run = run
        self.group = group
        let compression: FrameReader.Compression
        if let inflater = run.inflater {
            // A resuming subscriber's answer is checked, so it always inflates.
            compression = inflates || run.since != nil ? .inflate(inflater) : .skip
        } else {
            compression = .none
        }
        reader = FrameReader(compression: compression, maxFrameBytes: run.maxMessageBytes)
        handshake = ClientHandshake(
            host: run.host, port: run.port, path: run.path, subprotocol: run.subprotocol, offerDeflate: run.inflater != nil)
        connection.delegate = self
        connection.startReading()
        connection.write(handshake.request)
    }

    /// The run is over: close without counting it as a failure.
    func close() {
        stage = .done
        connection.close()
    }

    // MARK: TCPConnectionDelegate

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        switch stage {
        case .handshaking:
            readHandshake(bytes)
        case .subscribing, .subscribed:
            readFrames(bytes)
        case .done:
            break
        }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        fail("the server closed the connection")
    }

    func connectionDidDrain(_ connection: TCPConnection) {}

    func connectionDidClose(_ connection: TCPConnection) {
        if stage != .done {
            fail("the connection closed")
        }
    }

    // MARK: Handshake

    private func readHandshake(_ bytes: UnsafeRawBufferPointer) {
        switch handshake.read(bytes) {
        case .incomplete:
            return
        case .refused(let reason):
            fail(reason)
        case .accepted(let rest, let extensions):
            if run.inflater != nil, let extensions, !extensions.lowercased().contains("server_no_context_takeover") {
                return fail("the server keeps a compression context between messages (\(extensions))")
            }
            run.clientDidConnect()
            if run.subscribeMessages.isEmpty {
                stage = .subscribed
                run.clientDidSubscribe(group: group, sentAt: nil, at: Int64(Clock.microsecondsSinceEpoch()))
            } else {
                stage = .subscribing
                subscribeSentAt = Int64(Clock.microsecondsSinceEpoch())
                connection.write(WebSocketEncoder.text(run.subscribeMessages[group], maskKey: .random(in: .min ... .max)))
            }
            if !rest.isEmpty {
                rest.withUnsafeBytes { readFrames($0) }
            }
        }
    }

    // MARK: Frames

    private func readFrames(_ bytes: UnsafeRawBufferPointer) {
        run.wireBytes += bytes.count
        // One clock read per socket read: every frame in it arrived at the same moment.
        let now = Int64(Clock.microsecondsSinceEpoch())
        let fault = reader.read(bytes) { frame in
            guard stage != .done else { return }
            switch frame {
            case .text(let text):
                handle(text, now: now)
            case .compressed(let wireBytes):
                // A store's snapshot is large enough to come compressed: before the subscription
                // is answered, a compressed frame can only be that answer.
                if stage == .subscribing {
                    stage = .subscribed
                    run.clientDidSubscribe(group: group, sentAt: subscribeSentAt, at: now)
                } else {
                    run.recordUninflated(group: group, bytes: wireBytes, at: now)
                }
            case .ping(let payload):
                connection.write(WebSocketEncoder.frame(.pong, payload: payload, maskKey: .random(in: .min ... .max)))
            case .close:
                fail("the server sent close")
            }
        }
        if let fault {
            fail("bad frame from the server: \(fault)")
        }
    }

    private static let changesPrefix = Array(#"{"type":"changes""#.utf8)
    private static let subscribedPrefix = Array(#"{"type":"subscribed""#.utf8)
    private static let snapshotPrefix = Array(#"{"type":"snapshot""#.utf8)
    private static let errorPrefix = Array(#"{"type":"error""#.utf8)
    private static let presencePrefix = Array(#"{"type":"presence""#.utf8)
    private static let versionKey = FrameScan.Key(#""version":"#)
    private static let fromKey = FrameScan.Key(#""from":"#)
    private static let resetKey = FrameScan.Key(#""reset":"#)
    private static let sentAtKey = FrameScan.Key(#""sentAt":"#)
    private static let committedAtKey = FrameScan.Key(#""committedAt":"#)
    private static let firstCommittedAtKey = FrameScan.Key(#""firstCommittedAt":"#)

    /// A store's `changes` frame is a delivery, timed from the oldest commit it holds: its
    /// `firstCommittedAt` when it folds several change sets (`maxRate`), else its `committedAt`
    /// (a slow subscriber's conflated catch-up carries neither). A peer relaying such frames sends
    /// the same JSON. Any other frame with a publisher's `sentAt` is a topic delivery:
    /// Receptionist's `message` carries the body as `data`, and the peers send the body itself.
    private func handle(_ text: UnsafeBufferPointer<UInt8>, now: Int64) {
        if FrameScan.hasPrefix(text, Self.presencePrefix) {
            run.presenceFrames += 1
            run.presenceBytes += FrameScan.frameBytes(payload: text.count)
        } else if FrameScan.hasPrefix(text, Self.changesPrefix) {
            let head = FrameScan.head(text)
            if position != nil { follow(head) }
            let stamp = FrameScan.number(after: Self.firstCommittedAtKey, in: head)
                ?? FrameScan.number(after: Self.committedAtKey, in: head)
            run.record(group: group, stamp: stamp, bytes: FrameScan.frameBytes(payload: text.count), at: now)
        } else if stage == .subscribing
            && (FrameScan.hasPrefix(text, Self.subscribedPrefix) || FrameScan.hasPrefix(text, Self.snapshotPrefix))
        {
            // Before the search for `sentAt`, which would read a whole snapshot for nothing.
            stage = .subscribed
            run.clientDidSubscribe(group: group, sentAt: subscribeSentAt, at: now)
            if let since = run.since { checkAnswer(text, since: since) }
        } else if let stamp = FrameScan.number(after: Self.sentAtKey, in: text) {
            run.record(group: group, stamp: stamp, bytes: FrameScan.frameBytes(payload: text.count), at: now)
        } else if FrameScan.hasPrefix(text, Self.errorPrefix) {
            fail("server error: \(String(decoding: text, as: UTF8.self))")
        }
    }

    // MARK: Resume checks

    /// The first frame of a subscription that resumed after `since`.
    private func checkAnswer(_ text: UnsafeBufferPointer<UInt8>, since: Int64) {
        if FrameScan.hasPrefix(text, Self.subscribedPrefix) {
            run.resume.resumed += 1
            if FrameScan.number(after: Self.versionKey, in: text) != since { run.resume.wrongVersion += 1 }
            position = since
            awaitsFirstChange = true
        } else {
            // A snapshot's members before its models: type, store, version, epoch, reset.
            let head = UnsafeBufferPointer(rebasing: text[..<min(text.count, 256)])
            if FrameScan.flag(after: Self.resetKey, in: head) == true {
                run.resume.reset += 1
            } else {
                run.resume.notReset += 1
            }
            position = FrameScan.number(after: Self.versionKey, in: head) ?? 0
        }
    }

    /// A `changes` frame (its members before the list of changes) must follow the version held.
    private func follow(_ head: UnsafeBufferPointer<UInt8>) {
        guard let held = position, let version = FrameScan.number(after: Self.versionKey, in: head) else { return }
        let follows = (FrameScan.number(after: Self.fromKey, in: head) ?? version - 1) == held
        if awaitsFirstChange {
            awaitsFirstChange = false
            if follows { run.resume.firstChangeExact += 1 } else { run.resume.firstChangeGap += 1 }
        } else if !follows {
            run.resume.gaps += 1
        }
        position = version
    }

    // MARK: Ending

    private func fail(_ reason: String) {
        guard stage != .done else { return }
        let wasSubscribed = stage == .subscribed
        stage = .done
        run.clientDidFail(reason, wasSubscribed: wasSubscribed)
        connection.close()
    }
}
