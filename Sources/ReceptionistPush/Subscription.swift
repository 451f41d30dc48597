import ReceptionistModel
import ReceptionistWire

/// One subscriber's place in one store or topic, and the slow-client policy for it.
///
/// Invariants:
/// - `position` is the last version or sequence number the subscriber has been given (or that
///   its snapshot or history replay already covered); an event at or below it is skipped, so the
///   hand-over from snapshot or replay to the live stream neither doubles nor drops anything
///   (invariant 18).
/// - When its sink answers `.overLimit`, a store subscription conflates change sets into
///   `conflation` (bounded by the store's size) instead of queueing them; `flushConflated` hands
///   them over as one message once the sink has drained. A topic subscription is ended instead
///   (invariant 20).
///
/// Loop thread only.
public final class Subscription {
    // Every subscription holds these. What few subscriptions use (options, a presence watch, a
    // conflation) shares one box out of line, and the target's odd byte goes last: 16 bytes less
    // per subscription, which is a malloc size class less.
    //
    // Not counted: a fan-out reaches the sink of every member, and `unowned` costs an atomic
    // check-and-retain on each reach. Safe because a sink ends every subscription it holds
    // (taking it out of its topic or group, and out of any presence not yet sent) before it
    // goes, so no list holds a member whose sink is gone (invariant 46).
    public unowned(unsafe) let sink: any PushSink
    public private(set) var position: UInt64
    /// When the subscription began, in microseconds since the Unix epoch, as presence shows it.
    public let joinedAt: UInt64
    /// Who held the connection when the subscription began (presence): read once, so that its
    /// leave counts against the user its join counted for, whatever the connection presents later.
    public let member: PresenceUser?
    /// Absent until the subscription has options, follows presence or falls behind.
    private var extras: Extras?
    public let target: StreamTarget
    /// Its place in its topic's or group's `MemberList`, or -1 (within the same malloc size class).
    var memberSlot: Int32 = -1

    private final class Extras {
        let options: SubscriptionOptions
        var presenceWatch: PresenceWatch?
        var conflation: Conflation?
        init(_ options: SubscriptionOptions) { self.options = options }
    }

    /// What a store subscription asked for (models, paths, rate, old values); it names the group
    /// of the store's feed that serves it.
    public var options: SubscriptionOptions { extras?.options ?? .none }

    /// Set when the subscriber follows the target's presence: what it holds of it.
    var presenceWatch: PresenceWatch? {
        get { extras?.presenceWatch }
        set {
            if newValue == nil && extras == nil { return }
            madeExtras().presenceWatch = newValue
        }
    }

    /// Only a subscriber that fell behind pays for this, so it lives out of line.
    private var conflation: Conflation? {
        get { extras?.conflation }
        set {
            if newValue == nil && extras == nil { return }
            madeExtras().conflation = newValue
        }
    }

    private func madeExtras() -> Extras {
        if let extras { return extras }
        let made = Extras(.none)
        extras = made
        return made
    }

    private final class Conflation {
        /// The position the subscriber had when conflation began.
        let from: UInt64
        /// The epoch of what it folds (an event's), for the SSE `id:` of the frame it becomes.
        let epoch: String?
        var buffer = CoalescingBuffer()
        var changeSets = 0
        init(from: UInt64, epoch: String?) {
            self.from = from
            self.epoch = epoch
        }
    }

    public init(
        target: StreamTarget, sink: any PushSink, position: UInt64 = 0, options: SubscriptionOptions = .none,
        joinedAt: UInt64 = 0
    ) {
        self.target = target
        extras = options.isNone ? nil : Extras(options)
        self.sink = sink
        self.position = position
        self.joinedAt = joinedAt
        member = sink.presenceUser
    }

    /// Whether the subscriber follows the target's presence.
    public var followsPresence: Bool { presenceWatch != nil }

    /// The sink drained: a presence subscriber that missed a frame gets the whole presence now.
    public func flushPresence() {
        guard let watch = presenceWatch, watch.state == .stale else { return }
        watch.presence?.resync(self)
    }

    /// Whether change sets are being folded while the sink catches up.
    public var isConflating: Bool { conflation != nil }

    /// Moves the position forward past a replay or snapshot the caller has sent.
    public func advance(to position: UInt64) {
        if position > self.position { self.position = position }
    }

    /// Moves the position to exactly `position`, forward or back, dropping anything conflated:
    /// after a reset snapshot, or when a cluster topic's numbering restarted.
    public func reset(to position: UInt64) {
        conflation = nil
        self.position = position
    }

    /// A topic's messages `from...to` are lost: says so for the part this subscriber has not had.
    /// Tells the subscriber that messages `from...to` of `epoch` are lost. Numbered `to`: an
    /// `EventSource` that reconnects after it resumes after the gap, not from where it was.
    public func gap(from: UInt64, to: UInt64, epoch: String?) {
        let first = max(from, position + 1)
        guard first <= to else { return }
        sink.sendOwed(PushEvent(name: "gap", id: to, epoch: epoch, json: PushEncoder.gap(topic: target.name, from: first, to: to)))
        position = to
    }

    /// Hands `event` to the sink unless the subscriber already has it. Returns whether it was
    /// delivered: queued, or folded into the conflation of a subscriber that is behind.
    @discardableResult
    public func deliver(_ event: PushEvent) -> Bool {
        guard let id = event.id, id > position else { return false }
        if let pending = conflation, let changeSet = event.changeSet {
            pending.buffer.absorb(changeSet)
            pending.changeSets += 1
            position = id
            return true
        }
        switch sink.send(event) {
        case .queued:
            position = id
            return true
        case .overLimit:
            guard let changeSet = event.changeSet else {
                sink.endSlowConsumer(self)
                return false
            }
            let pending = Conflation(from: position, epoch: event.epoch)
            pending.buffer.absorb(changeSet)
            pending.changeSets = 1
            conflation = pending
            position = id
            return true
        case .refused:
            return false
        }
    }

    /// Hands a topic's run of messages (`PushEvent.run`) to the sink: whole when the subscriber
    /// has none of it yet, else only the messages past its position, one by one. Returns how
    /// many messages were delivered.
    func deliver(run event: PushEvent) -> Int {
        guard let lastID = event.id, lastID > position else { return 0 }
        if let firstID = event.run[0].id, firstID > position {
            return deliver(event) ? event.run.count : 0
        }
        var delivered = 0
        for message in event.run where message.id.map({ $0 > position }) ?? false {
            // A message not delivered means the sink refused or ended the stream: none after it.
            guard deliver(message) else { break }
            delivered += 1
        }
        return delivered
    }

    /// The sink drained: sends what was conflated, if anything, as one `changes` message.
    /// Returns how many change sets were folded into it.
    @discardableResult
    public func flushConflated() -> Int {
        guard let pending = conflation else { return 0 }
        conflation = nil
        var changes = pending.buffer.take()
        // Folded as a `maxRate` frame is, so projected again as one is.
        if let paths = options.paths {
            changes = ChangeFilter(models: nil, paths: paths.map(ModelKeyPath.init)).projectingRoots(changes)
        }
        let json = PushEncoder.conflated(
            store: target.name, version: position, from: pending.from, changes: changes, old: options.old)
        sink.sendOwed(PushEvent(name: "changes", id: position, epoch: pending.epoch, json: json))
        return pending.changeSets
    }
}
