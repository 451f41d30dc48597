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
/// - In a cluster (`relay.source` set) this node shares its own members (at most one write an
///   interval) and, while it has followers, holds the other live nodes' (`remote`): their joins
///   and leaves reach the followers as this node's do, and a node that stops beating its heart
///   leaves with all its members (invariant 44).
///
/// The thread `context` runs its work on (the loop's) only.
public final class Presence {
    public let target: StreamTarget
    unowned let members: any PresenceMembers
    let context: any ExecutionContext
    let settings: PresenceSettings
    let counters: PushCounters
    /// Subscriptions per non-empty user.
    var users: [String: Int] = [:]
    /// The subscriptions that follow this presence.
    var followers: [ObjectIdentifier: Subscription] = [:]
    /// Joins and leaves since the last flush, by client id.
    var pending: [UInt64: Change] = [:]
    /// Whether a flush is due (one delayed job at a time).
    var flushDue = false
    /// The counts the last flush reported.
    var lastCounts = Counts(clients: 0, users: 0)
    /// A follower was sent counts other than `lastCounts` (its whole presence, between flushes):
    /// the next flush sends the counts to every counting follower, moved or not.
    var countsOwed = false
    /// The cluster, when there is one.
    let relay: PresenceRelay?
    /// The other nodes' members, by node, while this presence has followers.
    var remote: [String: RemotePresence] = [:]
    /// Whether this node's entry is due to be shared (one delayed job at a time).
    var shareDue = false
    /// Whether the cluster holds an entry of this node's for the target (shared, not taken back).
    var entryShared = false

    enum Change {
        /// `known`: some follower knows the member already: the join replaced a leave still
        /// pending, or a whole list named the member since (a follower that came meanwhile). Its
        /// leave is then sent, never cancelled out.
        case joined(Subscription, known: Bool)
        case joinedElsewhere(RemotePresence.Member)
        case left(user: String)
    }

    /// Members and distinct non-empty users.
    public struct Counts: Equatable, Sendable {
        public var clients: Int
        public var users: Int
    }

    init(
        target: StreamTarget, members: any PresenceMembers, context: any ExecutionContext, settings: PresenceSettings,
        counters: PushCounters, relay: PresenceRelay? = nil
    ) {
        self.target = target
        self.members = members
        self.context = context
        self.settings = settings
        self.counters = counters
        self.relay = relay
        relay?.register(self)
    }

    /// On the loop, where the hub lets go of it: a store deleted, a topic forgotten. An entry
    /// shared, or one due, is taken back now; the delayed share would find the presence gone, and
    /// the entry stayed in the cluster for as long as this node lived.
    deinit {
        if entryShared || shareDue { relay?.source?.sharePresence(target, entry: nil) }
        relay?.unregister(target)
    }

    /// Every node's members together. Users are counted once each while every node lists its
    /// members; once one gives counts only (past its cap), the nodes' distinct users are added up,
    /// so a user on two nodes counts twice.
    public var counts: Counts { Self.counts(clients: members.subscriberCount, users: users, remote: remote) }

    /// This node's `clients` and `users` (by user, its subscriptions) with the other nodes'.
    static func counts(clients local: Int, users: [String: Int], remote: [String: RemotePresence]) -> Counts {
        guard !remote.isEmpty else { return Counts(clients: local, users: users.count) }
        var clients = local
        var listed = Set(users.keys)
        var unlisted = 0
        for entry in remote.values {
            clients += entry.clients
            if let others = entry.members {
                for member in others.values where !member.user.isEmpty { listed.insert(member.user) }
            } else {
                unlisted += entry.users
            }
        }
        return Counts(clients: clients, users: listed.count + unlisted)
    }

    /// Subscriptions that follow the presence now.
    public var followerCount: Int { followers.count }

    // MARK: Joining and leaving

    /// `subscription` was added to the owner's subscriptions. If it asked to follow the presence,
    /// it is sent the whole of it now.
    func joined(_ subscription: Subscription) {
        if let user = subscription.member?.user, !user.isEmpty { users[user, default: 0] += 1 }
        scheduleShare()
        if !followers.isEmpty {
            // A leave then a join of one client is a join: the list gets its new `joinedAt`.
            let client = subscription.sink.clientID
            var known = false
            if case .left? = pending[client] { known = true }
            pending[client] = .joined(subscription, known: known)
            scheduleFlush()
        }
        if let watch = subscription.presenceWatch {
            watch.presence = self
            let first = followers.isEmpty
            followers[ObjectIdentifier(subscription)] = subscription
            sendWhole(to: subscription, watch: watch)
            // The other nodes' members follow as joins once they are read.
            if first { refreshIfFollowed() }
        }
    }

    /// `subscription` was removed from the owner's subscriptions.
    func left(_ subscription: Subscription) {
        let user = subscription.member?.user ?? ""
        if !user.isEmpty, let count = users[user] {
            users[user] = count > 1 ? count - 1 : nil
        }
        followers.removeValue(forKey: ObjectIdentifier(subscription))
        scheduleShare()
        guard !followers.isEmpty else {
            pending.removeAll()
            // Nobody here reads the other nodes' members now; they are read again for the next.
            remote.removeAll()
            return
        }
        let client = subscription.sink.clientID
        if case .joined(let joined, let known) = pending[client], joined === subscription, !known {
            // Joined and left within one interval: nobody needs to hear of it.
            pending.removeValue(forKey: client)
        } else {
            // Left, or left again after a join that replaced its leave: followers know the member.
            pending[client] = .left(user: user)
        }
        scheduleFlush()
    }

    /// A follower that missed a frame has drained: it gets the whole presence.
    func resync(_ subscription: Subscription) {
        guard let watch = subscription.presenceWatch, followers[ObjectIdentifier(subscription)] != nil else { return }
        sendWhole(to: subscription, watch: watch)
    }

    // MARK: Delivering

    /// Whether the members are past the cap. Read once per frame or flush: with other nodes'
    /// members, counting users walks them all.
    var isOverCap: Bool { counts.clients > settings.maxMembers }

    /// The whole presence as one frame: the list, or the counts past `maxMembers`.
    func wholeFrame() -> (PushEvent, PresenceWatch.State) {
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
        for entry in remote.values {
            for member in (entry.members ?? [:]).values {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                out += member.json
            }
        }
        out += "]}".utf8
        return (PushEvent(name: "presence", id: nil, json: out), .list)
    }

    func sendWhole(to subscription: Subscription, watch: PresenceWatch) {
        let (event, state) = wholeFrame()
        counters.presenceFrames += 1
        // What the subscriber asked for (or is owed after missing a frame) goes out past the live
        // limit, within the connection's hard limit for owed messages (invariant 28).
        watch.state = subscription.sink.sendOwed(event) == .queued ? state : .stale
        if state == .counts, counts != lastCounts { countsOwed = true }
        // The list named every member that joined since the last flush: a leave of one of them
        // within this interval must reach this follower too, not cancel its join out.
        for (client, change) in pending {
            if case .joined(let joined, known: false) = change { pending[client] = .joined(joined, known: true) }
        }
    }

    func scheduleFlush() {
        guard !flushDue else { return }
        flushDue = true
        afterInterval { $0.flush() }
    }

    /// Runs `body` on this presence one interval from now, if it still exists.
    func afterInterval(_ body: @escaping (Presence) -> Void) {
        let later = ThreadBound((PresenceReference(self), body))
        context.after(settings.intervalSeconds) {
            let (presence, body) = later.value
            if let presence = presence.presence { body(presence) }
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
        let overCap = counts.clients > settings.maxMembers
        let countsMoved = counts != lastCounts || countsOwed
        lastCounts = counts
        countsOwed = false
        var delta: PushEvent?
        var whole: (PushEvent, PresenceWatch.State)?
        for subscription in followers.values {
            guard let watch = subscription.presenceWatch else { continue }
            let event: PushEvent
            let state: PresenceWatch.State
            switch watch.state {
            case .stale:
                continue
            case .list where !overCap:
                guard !changes.isEmpty else { continue }
                if delta == nil { delta = deltaFrame(changes, counts) }
                (event, state) = (delta!, .list)
            case .counts where overCap:
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
    func offer(_ event: PushEvent, to subscription: Subscription, watch: PresenceWatch, as state: PresenceWatch.State) {
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

    func deltaFrame(_ changes: [UInt64: Change], _ counts: Counts) -> PushEvent {
        var out = PushEncoder.presenceHead(target, counts)
        out += ",\"joins\":[".utf8
        var first = true
        for change in changes.values {
            switch change {
            case .joined(let subscription, _):
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                PushEncoder.presenceMember(subscription, &out)
            case .joinedElsewhere(let member):
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                out += member.json
            case .left:
                continue
            }
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

}

/// A presence held weakly, for a timer or a reply that may outlive it.
final class PresenceReference {
    weak var presence: Presence?
    init(_ presence: Presence) { self.presence = presence }
}
