import ReceptionistModel
import ReceptionistWire

/// The push core's side of one store: its subscriptions, in groups of equal options, each group
/// served by a receptionist of its own (`StoreGroup`).
///
/// The group without options (every change set of the whole store, as it commits) lives as long
/// as the feed, so its history of encoded events outlives a reconnect storm; any other group
/// comes with its first member and goes with its last.
///
/// The thread that creates it, which must be the one `context` runs its work on (the loop's).
public final class StoreFeed: PresenceMembers {
    public let store: ModelStore
    private var groups: [SubscriptionOptions: StoreGroup] = [:]
    private let context: any ExecutionContext
    private let historyLimit: Int
    /// What the groups keep of their events, together.
    private let historyBudget: HistoryBudget
    /// The snapshot the unfiltered groups share.
    private let snapshot = SnapshotSlot()
    private let counters: PushCounters
    private let presenceSettings: PresenceSettings
    /// Who subscribes, made with the first subscriber.
    public private(set) lazy var presence = Presence(
        target: .store(store.name), members: self, context: context, settings: presenceSettings, counters: counters,
        relay: presenceRelay)
    /// The cluster's presence, when there is one.
    private let presenceRelay: PresenceRelay?

    init(
        store: ModelStore, context: any ExecutionContext, historyLimit: Int, historyBytes: Int = .max, counters: PushCounters,
        presence: PresenceSettings = PresenceSettings(), presenceRelay: PresenceRelay? = nil
    ) {
        self.presenceRelay = presenceRelay
        self.store = store
        self.context = context
        self.historyLimit = historyLimit
        historyBudget = HistoryBudget(limit: historyBytes)
        self.counters = counters
        presenceSettings = presence
        _ = group(for: .none)
    }

    deinit {
        for group in groups.values { group.close() }
    }

    /// Kept as members come and go, so presence counts cost nothing per member.
    public private(set) var subscriberCount = 0

    /// Groups of distinct options, the one without options included.
    public var groupCount: Int { groups.count }

    /// The bytes of events the groups keep for resumes, together.
    var keptHistoryBytes: Int { historyBudget.used }

    /// The most groups one store serves. Each filters every commit on the committing thread, so
    /// their number is the cost of a commit; past it a new set of options is refused.
    public static let maxGroups = 256

    /// Whether a subscription with `options` can be served: its group exists or there is room.
    func accepts(_ options: SubscriptionOptions) -> Bool {
        groups[options] != nil || groups.count < Self.maxGroups
    }

    /// The group serving `options`, created on first use.
    func group(for options: SubscriptionOptions) -> StoreGroup {
        if let group = groups[options] { return group }
        let group = StoreGroup(
            store: store, options: options, context: context, historyLimit: historyLimit, budget: historyBudget,
            sharedSnapshot: snapshot, counters: counters)
        groups[options] = group
        return group
    }

    func forEachMember(_ body: (Subscription) -> Void) {
        for group in groups.values { group.forEachMember(body) }
    }

    /// The subscriptions waiting for the shared log, which are in no group yet.
    var resumingSubscriptions: Dictionary<ObjectIdentifier, Subscription>.Values { resuming.values }

    /// Starts `subscription`'s live stream in its group, and makes it a member of the presence.
    func add(_ subscription: Subscription) {
        group(for: subscription.options).add(subscription)
        subscriberCount += 1
        presence.joined(subscription)
    }

    /// Subscriptions waiting for the shared log's change sets before they join (a resume older
    /// than this replica's history). One that leaves meanwhile is simply dropped from here; a
    /// deleted store tells them as it tells its members.
    private var resuming: [ObjectIdentifier: Subscription] = [:]

    func startResuming(_ subscription: Subscription) {
        resuming[ObjectIdentifier(subscription)] = subscription
    }

    /// Whether `subscription` was still waiting for the shared log (it had not left, nor was the
    /// store deleted); it waits no more. Its group stays until it has joined it: call
    /// `closeUnusedGroups` then.
    func endResuming(_ subscription: Subscription) -> Bool {
        resuming.removeValue(forKey: ObjectIdentifier(subscription)) != nil
    }

    func remove(_ subscription: Subscription) {
        if endResuming(subscription) { return closeUnusedGroups() }
        guard let group = groups[subscription.options], group.remove(subscription) else { return }
        subscriberCount -= 1
        presence.left(subscription)
        closeIfUnused(subscription.options)
    }

    /// Closes every group: the store is gone.
    func closeAll() {
        for group in groups.values { group.close() }
        groups = [:]
        resuming = [:]
    }

    /// Closes the group of `options` once it has no member and nobody is resuming into it (the
    /// group without options stays).
    func closeIfUnused(_ options: SubscriptionOptions) {
        guard !options.isNone, let group = groups[options], group.memberCount == 0 else { return }
        if !resuming.isEmpty { return }
        group.close()
        groups.removeValue(forKey: options)
    }

    /// Closes every group without members, once nobody is resuming: those whose last member left
    /// while a resume kept them (each still filtered every commit, and counted against
    /// `maxGroups`).
    func closeUnusedGroups() {
        guard resuming.isEmpty else { return }
        for (options, group) in groups where !options.isNone && group.memberCount == 0 {
            group.close()
            groups.removeValue(forKey: options)
        }
    }
}
