import ReceptionistJSON
import ReceptionistSync

/// Observes a store on whatever thread commits, and bounces the changes onto a target execution
/// context, where `task` runs: the Cocoa Receptionist pattern, made thread-safe. On the way it
/// filters (models and key paths, `ChangeFilter`), coalesces, or collects into batches.
///
/// Invariants:
/// - The target is woken only when pending work goes from none to some; further changes join the
///   pending work until the target drains it. So there is at most one wake-up per delivery.
/// - `each` delivers every change set, in version order, none lost. Past `maxPendingChangeSets` the
///   committing thread waits for the target to catch up (backpressure onto the job, never loss).
/// - `coalesce` and `batch` deliver the latest value per (model, key path); applying each delivery
///   in order converges to the store's state. Their pending work is bounded by the store's size.
/// - `batch(interval)` delivers at most once per interval, measured on the target's clock from one
///   delivery to the next: the first change after a quiet spell goes at once, and no change
///   waits longer than `interval` (plus the target's own delay) after it was observed.
///
/// Any thread. A receptionist works until `cancel` (or until it is released).
public final class Receptionist: Sendable {
    public enum Policy: Sendable, Equatable {
        case each
        case coalesce
        /// Coalesce, and deliver at most once per interval.
        case batch(intervalSeconds: Double)
    }

    /// What the task receives.
    public struct Delivery: Sendable {
        /// The store version the delivery brings the receiver up to.
        public let version: UInt64
        /// Under `each`: every change set since the last delivery, in order.
        public let changeSets: [ChangeSet]
        /// Under `coalesce` and `batch`: the latest value per (model, key path).
        public let changes: [ModelChange]
        /// Change sets folded into this delivery (for `each`, `changeSets.count`).
        public let changeSetCount: Int
        /// Under `coalesce` and `batch`: the commit times of the first and last change set folded in.
        public var firstCommittedAtMicroseconds: UInt64 = 0
        public var committedAtMicroseconds: UInt64 = 0
        /// Under `coalesce` and `batch`: a replica's reset was folded in, so `changes` describe a
        /// jump between unrelated versions and the receiver needs a fresh snapshot instead.
        public var containsReset = false
        /// The epoch of the last change set folded in (`ChangeSet.epoch`; nil for a store whose
        /// epoch is fixed).
        public var epoch: String?
    }

    public struct Statistics: Sendable, Equatable {
        /// Change sets observed.
        public var observed = 0
        /// Times the task ran.
        public var deliveries = 0
        /// Jobs handed to the target (wake-ups).
        public var wakeups = 0
    }

    private struct State {
        var pendingSets: [ChangeSet] = []
        var coalescing = CoalescingBuffer()
        var pendingCount = 0
        var scheduled = false
        var cancelled = false
        /// When the last delivery ran, on the target's clock (`batch` only).
        var lastDeliveryAt = -Double.infinity
        /// A replica's reset is pending: it goes at once, whatever the interval (`batch` only).
        var urgent = false
        var statistics = Statistics()
    }

    public let policy: Policy
    public let maxPendingChangeSets: Int
    private let target: any ExecutionContext
    private let task: @Sendable (Delivery) -> Void
    private let state = ConditionLock(State())
    private let token = PThreadLock<ObservationToken?>(nil)

    public init(
        store: ModelStore, model: String? = nil, keyPathPrefix: ModelKeyPath? = nil, filter: ChangeFilter = .all,
        policy: Policy = .each, target: any ExecutionContext, maxPendingChangeSets: Int = 65_536,
        task: @escaping @Sendable (Delivery) -> Void
    ) {
        self.policy = policy
        self.maxPendingChangeSets = max(1, maxPendingChangeSets)
        self.target = target
        self.task = task
        let observation = store.observe(model: model, keyPathPrefix: keyPathPrefix, filter: filter, options: .both) {
            [weak self] changeSet in
            self?.observed(changeSet)
        }
        token.withLock { $0 = observation }
    }

    deinit {
        cancel()
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Stops observing. Pending work not yet delivered is dropped. Any thread.
    ///
    /// Marked cancelled before the observation is removed: removing it waits for a notification in
    /// progress, which may itself be waiting here for the target to drain (`each` past its
    /// limit); woken by the mark, it returns, and neither side waits on the other.
    public func cancel() {
        state.withLock { $0.cancelled = true }
        state.broadcast()
        token.withLock { $0 }?.cancel()
        token.withLock { $0 = nil }
    }

    /// Runs on the committing thread, inside the store's notification.
    private func observed(_ changeSet: ChangeSet) {
        // Nil: no wake-up. Otherwise the delay before the delivery should run.
        let wake: Double? = state.wait(
            until: { state in
                state.cancelled || policy != .each || state.pendingSets.count < maxPendingChangeSets
            },
            then: { state in
                guard !state.cancelled else { return nil }
                state.statistics.observed += 1
                state.pendingCount += 1
                if policy == .each {
                    state.pendingSets.append(changeSet)
                } else {
                    state.coalescing.absorb(changeSet)
                }
                if changeSet.isReset && !state.urgent, case .batch = policy {
                    // A subscriber must not go on from a state that no longer exists: the reset
                    // is delivered now, even if a delivery is already waiting for its time.
                    state.urgent = true
                    state.scheduled = true
                    state.statistics.wakeups += 1
                    return 0
                }
                guard !state.scheduled else { return nil }
                state.scheduled = true
                state.statistics.wakeups += 1
                guard case .batch(let interval) = policy else { return 0 }
                return max(0, state.lastDeliveryAt + interval - target.now)
            })
        guard let wake else { return }
        if wake > 0 {
            target.after(wake) { [weak self] in self?.deliver() }
        } else if !target.enqueue({ [weak self] in self?.deliver() }) {
            // The target has shut down; nothing will run there again.
            state.withLock { $0.cancelled = true }
            state.broadcast()
        }
    }

    /// Runs on the target: hands everything pending to the task in one delivery.
    private func deliver() {
        let now = target.now
        var early: Double?
        let delivery: Delivery? = state.withLock { state in
            // A timer may fire a little before its time (the target's clock for timers can lag
            // the one delays were measured on): then it is set again for the rest, so deliveries
            // are never closer than the interval. A pending reset does not wait.
            if case .batch(let interval) = policy, !state.urgent, !state.cancelled, state.pendingCount > 0,
               now < state.lastDeliveryAt + interval - 0.000_5
            {
                early = state.lastDeliveryAt + interval - now
                return nil
            }
            state.scheduled = false
            state.urgent = false
            guard !state.cancelled, state.pendingCount > 0 else { return nil }
            let count = state.pendingCount
            state.pendingCount = 0
            state.statistics.deliveries += 1
            state.lastDeliveryAt = now
            if policy == .each {
                let sets = state.pendingSets
                state.pendingSets.removeAll(keepingCapacity: true)
                return Delivery(version: sets.last?.version ?? 0, changeSets: sets, changes: [], changeSetCount: count)
            }
            // The scalars first: a copy of the whole buffer would make `take` copy its tables.
            let version = state.coalescing.version
            let first = state.coalescing.firstCommittedAtMicroseconds
            let last = state.coalescing.committedAtMicroseconds
            let reset = state.coalescing.sawReset, epoch = state.coalescing.epoch
            return Delivery(
                version: version, changeSets: [], changes: state.coalescing.take(), changeSetCount: count,
                firstCommittedAtMicroseconds: first, committedAtMicroseconds: last, containsReset: reset, epoch: epoch)
        }
        if let early {
            target.after(early) { [weak self] in self?.deliver() }
            return
        }
        if policy == .each { state.broadcast() }
        if let delivery {
            task(delivery)
        }
    }
}
