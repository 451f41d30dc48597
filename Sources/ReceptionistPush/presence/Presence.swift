import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// The subscriptions a presence reads: those of one topic or one store.
///
/// Loop thread only.
protocol PresenceMembers: AnyObject {
    /// How many there are now, at a cost that does not grow with them.
    var subscriberCount: Int { get }
    func forEachMember(_ body: (Subscription) -> Void)
}

/// Who subscribes to one topic or store, and the delivery of their joins and leaves to the
/// subscriptions that follow it (`"presence": true`).
///
/// It is the receptionist pattern once more: joins and leaves are collected on the way and handed
/// over in one batch an interval. Invariants (`docs/DESIGN.md`, 36):
/// - Every member counts: `clients` is the owner's subscriber count and `users` the distinct
///   non-empty users, kept as joins and leaves happen, so the counts cost nothing per member.
/// - Joins and leaves wait in `pending`, one entry per client, for at most one interval from the
///   first of them; a join then a leave of one client cancels out. While nobody follows the
///   presence nothing is collected. So `pending` holds at most one entry per client that joined
///   or left within the interval.
/// - Each follower holds either the list or the counts it was last sent, or is `stale`: a frame it
///   could not take (its queue past the limit) is not sent again piecemeal; once it drains it gets
///   the whole presence (`resync`). A join or leave is never lost silently.
/// - One frame per kind per flush, encoded once and shared by every follower that takes it.
///
/// The thread `context` runs its work on (the loop's) only.
public final class Presence {
    public let target: StreamTarget
    private unowned let members: any PresenceMembers
    private let context: any ExecutionContext
    private let settings: PresenceSettings
    private let counters: PushCounters
    /// Subscriptions per non-empty user.
    private var users: [String: Int] = [:]
    /// The subscriptions that follow this presence.
    private var followers: [ObjectIdentifier: Subscription] = [:]
    /// Joins and leaves since the last flush, by client id.
    private var pending: [UInt64: Change] = [:]
    /// Whether a flush is due (one delayed job at a time).
    private var flushDue = false
    /// The counts the last flush reported.
    private var lastCounts = Counts(clients: 0, users: 0)

    private enum Change {
        case joined(Subscription)
        case left(user: String)
    }

    /// Members and distinct non-empty users.
    public struct Counts: Equatable, Sendable {
        public var clients: Int
        public var users: Int
    }

    init(
        target: StreamTarget, members: any PresenceMembers, context: any ExecutionContext, settings: PresenceSettings,
        counters: PushCounters
    ) {
        self.target = target
        self.members = members
        self.context = context
        self.settings = settings
        self.counters = counters
    }

    public var counts: Counts { Counts(clients: members.subscriberCount, users: users.count) }

    /// Subscriptions that follow the presence now.
    public var followerCount: Int { followers.count }

    // MARK: Joining and leaving

    /// `subscription` was added to the owner's subscriptions. If it asked to follow the presence,
    /// it is sent the whole of it now.
    func joined(_ subscription: Subscription) {
        if let user = subscription.member?.user, !user.isEmpty { users[user, default: 0] += 1 }
        if !followers.isEmpty {
            // A leave then a join of one client is a join: the list gets its new `joinedAt`.
            pending[subscription.sink.clientID] = .joined(subscription)
            scheduleFlush()
        }
        if let watch = subscription.presenceWatch {
            watch.presence = self
            followers[ObjectIdentifier(subscription)] = subscription
            sendWhole(to: subscription, watch: watch)
        }
    }

    /// `subscription` was removed from the owner's subscriptions.
    func left(_ subscription: Subscription) {
        let user = subscription.member?.user ?? ""
        if !user.isEmpty, let count = users[user] {
            users[user] = count > 1 ? count - 1 : nil
        }
        followers.removeValue(forKey: ObjectIdentifier(subscription))
        guard !followers.isEmpty else {
            pending.removeAll()
            return
        }
        let client = subscription.sink.clientID
        if case .joined(let joined) = pending[client], joined === subscription {
            // Joined and left within one interval: nobody needs to hear of it.
            pending.removeValue(forKey: client)
        } else {
            pending[client] = .left(user: user)
        }
        scheduleFlush()
    }

    /// A follower that missed a frame has drained: it gets the whole presence.
    func resync(_ subscription: Subscription) {
        guard let watch = subscription.presenceWatch, followers[ObjectIdentifier(subscription)] != nil else { return }
        sendWhole(to: subscription, watch: watch)
    }

    // MARK: Asking

    /// The members as the HTTP API answers: at most `limit` of them, with the counts.
    public func reply(limit: Int) -> [UInt8] {
        var out = PushEncoder.presenceReplyHead(target, counts)
        out += ",\"members\":[".utf8
        var written = 0
        var truncated = false
        members.forEachMember { subscription in
            guard written < limit else {
                truncated = true
                return
            }
            if written > 0 { out.append(UInt8(ascii: ",")) }
            PushEncoder.presenceMember(subscription, &out)
            written += 1
        }
        out.append(UInt8(ascii: "]"))
        if truncated { out += ",\"truncated\":true".utf8 }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The counts alone, as the HTTP API answers `?stats=true`.
    public func statsReply() -> [UInt8] {
        var out = PushEncoder.presenceReplyHead(target, counts)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The answer for a topic or store nobody has subscribed to on this node.
    public static func emptyReply(_ target: StreamTarget, stats: Bool) -> [UInt8] {
        var out = PushEncoder.presenceReplyHead(target, Counts(clients: 0, users: 0))
        out += (stats ? "}" : ",\"members\":[]}").utf8
        return out
    }

    // MARK: Delivering

    private var isOverCap: Bool { members.subscriberCount > settings.maxMembers }

    /// The whole presence as one frame: the list, or the counts past `maxMembers`.
    private func wholeFrame() -> (PushEvent, PresenceWatch.State) {
        let counts = counts
        if isOverCap {
            return (PushEvent(name: "presence", id: nil, json: PushEncoder.presenceCounts(target, counts)), .counts)
        }
        var out = PushEncoder.presenceHead(target, counts)
        out += ",\"members\":[".utf8
        var first = true
        members.forEachMember { subscription in
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            PushEncoder.presenceMember(subscription, &out)
        }
        out += "]}".utf8
        return (PushEvent(name: "presence", id: nil, json: out), .list)
    }

    private func sendWhole(to subscription: Subscription, watch: PresenceWatch) {
        let (event, state) = wholeFrame()
        counters.presenceFrames += 1
        // What the subscriber asked for (or is owed after missing a frame) goes out past the live
        // limit, within the connection's hard limit for owed messages (invariant 28).
        watch.state = subscription.sink.sendOwed(event) == .queued ? state : .stale
    }

    private func scheduleFlush() {
        guard !flushDue else { return }
        flushDue = true
        let presence = ThreadBound(WeakPresence(self))
        context.after(settings.intervalSeconds) {
            presence.value.presence?.flush()
        }
    }

    /// Sends what changed since the last flush to every follower: the joins and leaves to those
    /// that hold the list, the whole list to those that held the counts, the counts (when they
    /// moved) past `maxMembers`. Each kind of frame is encoded once.
    func flush() {
        flushDue = false
        let changes = pending
        pending.removeAll()
        guard !followers.isEmpty else { return }
        let counts = counts
        let countsMoved = counts != lastCounts
        lastCounts = counts
        var delta: PushEvent?
        var whole: (PushEvent, PresenceWatch.State)?
        for subscription in followers.values {
            guard let watch = subscription.presenceWatch else { continue }
            let event: PushEvent
            let state: PresenceWatch.State
            switch watch.state {
            case .stale:
                continue
            case .list where !isOverCap:
                guard !changes.isEmpty else { continue }
                if delta == nil { delta = deltaFrame(changes, counts) }
                (event, state) = (delta!, .list)
            case .counts where isOverCap:
                guard countsMoved else { continue }
                if whole == nil { whole = wholeFrame() }
                (event, state) = whole!
            default:
                // The list became counts, or the counts a list again.
                if whole == nil { whole = wholeFrame() }
                (event, state) = whole!
            }
            offer(event, to: subscription, watch: watch, as: state)
        }
    }

    /// A live presence frame obeys the live limit (invariant 20): one the follower cannot take
    /// now makes it stale, and it gets the whole presence once it drains.
    private func offer(_ event: PushEvent, to subscription: Subscription, watch: PresenceWatch, as state: PresenceWatch.State) {
        switch subscription.sink.send(event) {
        case .queued:
            counters.presenceFrames += 1
            watch.state = state
        case .overLimit:
            watch.state = .stale
        case .refused:
            break
        }
    }

    private func deltaFrame(_ changes: [UInt64: Change], _ counts: Counts) -> PushEvent {
        var out = PushEncoder.presenceHead(target, counts)
        out += ",\"joins\":[".utf8
        var first = true
        for case .joined(let subscription) in changes.values {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            PushEncoder.presenceMember(subscription, &out)
        }
        out += "],\"leaves\":[".utf8
        first = true
        for (client, change) in changes {
            guard case .left(let user) = change else { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            PushEncoder.presenceLeave(client: client, user: user, &out)
        }
        out += "]}".utf8
        return PushEvent(name: "presence", id: nil, json: out)
    }

    private final class WeakPresence {
        weak var presence: Presence?
        init(_ presence: Presence) { self.presence = presence }
    }
}

/// What a presence follower holds: the list, the counts, or nothing it can trust (`stale`: it
/// missed a frame, and gets the whole presence once its connection drains).
///
/// Loop thread only.
final class PresenceWatch {
    enum State {
        case list
        case counts
        case stale
    }

    weak var presence: Presence?
    /// Stale until the first frame is queued.
    var state = State.stale
}
