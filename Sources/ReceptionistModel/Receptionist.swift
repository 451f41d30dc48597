import ReceptionistJSON
import ReceptionistSync

/// Observes a store on whatever thread commits, and bounces the changes onto a target execution
/// context, where `task` runs: the Cocoa Receptionist pattern, made thread-safe.
///
/// Invariants:
/// - The target is woken only when pending work goes from none to some; further changes join the
///   pending work until the target drains it.
/// - `each` delivers every change set, in version order, none lost. Past `maxPendingChangeSets` the
///   committing thread waits for the target to catch up (backpressure onto the job, never loss).
/// - `coalesce` and `batch` deliver the latest value per (model, key path); applying each delivery
///   in order converges to the store's state. Their pending work is bounded by the store's size.
///
/// Any thread. A receptionist works until `cancel` (or until it is released).
public final class Receptionist: Sendable {
    public enum Policy: Sendable, Equatable {
        case each
        case coalesce
        /// Coalesce, and deliver on a timer at this interval rather than on each wake-up.
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
        var statistics = Statistics()
    }

    public let policy: Policy
    public let maxPendingChangeSets: Int
    private let target: any ExecutionContext
    private let task: @Sendable (Delivery) -> Void
    private let state = ConditionLock(State())
    private let token = PThreadLock<ObservationToken?>(nil)
    private let timer = PThreadLock<(any Cancellable)?>(nil)

    public init(
        store: ModelStore, model: String? = nil, keyPathPrefix: ModelKeyPath? = nil,
        policy: Policy = .each, target: any ExecutionContext, maxPendingChangeSets: Int = 65_536,
        task: @escaping @Sendable (Delivery) -> Void
    ) {
        self.policy = policy
        self.maxPendingChangeSets = max(1, maxPendingChangeSets)
        self.target = target
        self.task = task
        let observation = store.observe(model: model, keyPathPrefix: keyPathPrefix, options: .both) { [weak self] changeSet in
            self?.observed(changeSet)
        }
        token.withLock { $0 = observation }
        if case .batch(let interval) = policy {
            let ticker = target.every(interval) { [weak self] in self?.deliver() }
            timer.withLock { $0 = ticker }
        }
    }

    deinit {
        cancel()
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Stops observing. Pending work not yet delivered is dropped. Any thread.
    public func cancel() {
        token.withLock { $0 }?.cancel()
        token.withLock { $0 = nil }
        timer.withLock { $0 }?.cancel()
        timer.withLock { $0 = nil }
        state.withLock { $0.cancelled = true }
        state.broadcast()
    }

    /// Runs on the committing thread, inside the store's notification.
    private func observed(_ changeSet: ChangeSet) {
        let wake: Bool = state.wait(
            until: { state in
                state.cancelled || policy != .each || state.pendingSets.count < maxPendingChangeSets
            },
            then: { state in
                guard !state.cancelled else { return false }
                state.statistics.observed += 1
                state.pendingCount += 1
                if policy == .each {
                    state.pendingSets.append(changeSet)
                } else {
                    state.coalescing.absorb(changeSet)
                }
                if case .batch = policy { return false }
                guard !state.scheduled else { return false }
                state.scheduled = true
                state.statistics.wakeups += 1
                return true
            })
        if wake && !target.enqueue({ [weak self] in self?.deliver() }) {
            // The target has shut down; nothing will run there again.
            state.withLock { $0.cancelled = true }
            state.broadcast()
        }
    }

    /// Runs on the target: hands everything pending to the task in one delivery.
    private func deliver() {
        let delivery: Delivery? = state.withLock { state in
            state.scheduled = false
            guard !state.cancelled, state.pendingCount > 0 else { return nil }
            let count = state.pendingCount
            state.pendingCount = 0
            state.statistics.deliveries += 1
            if policy == .each {
                let sets = state.pendingSets
                state.pendingSets.removeAll(keepingCapacity: true)
                return Delivery(version: sets.last?.version ?? 0, changeSets: sets, changes: [], changeSetCount: count)
            }
            let version = state.coalescing.version
            return Delivery(version: version, changeSets: [], changes: state.coalescing.take(), changeSetCount: count)
        }
        if policy == .each { state.broadcast() }
        if let delivery {
            task(delivery)
        }
    }
}
