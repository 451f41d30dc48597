import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// Why a stream is ended by the gateway rather than by its client.
enum StreamEnd {
    /// The client fell too far behind on a topic (invariant 20); it resumes from the history.
    case slowConsumer
    /// The subscription token ran out (`docs/SECURITY.md`).
    case tokenExpired
    /// The refresh hook would not extend the connect hook's grant (`docs/HOOKS.md`).
    case grantRefused(String)
}

/// A long-lived stream of push events: a WebSocket or an SSE session. Everything the two have in
/// common is implemented once, here: the outbound limit and its policy (`send`), subscribing and
/// unsubscribing through the hub, the catch-up after a drain, the token's expiry and the clean-up
/// on close. Each transport says only how it frames an event and how it ends a stream.
///
/// Loop thread only.
protocol StreamSession: GatewaySession, PushSink, TCPConnectionDelegate {
    var core: StreamCore { get set }
    /// Whether the stream still takes messages (for WebSocket: no close frame sent yet).
    var isWritable: Bool { get }
    /// Queues `event` in this transport's framing, and counts it.
    func write(_ event: PushEvent)
    /// Tells the client why, then ends the stream.
    func end(_ reason: StreamEnd)
}

/// How many times `--max-queued-bytes` what a client asked for may queue (invariant 28).
private let owedLimitFactor = 4

extension StreamSession {
    static var owedFactor: Int { owedLimitFactor }

    /// The gateway's services: kept once by the loop, not by each session.
    var services: StreamServices { StreamServices.of(connection.loop) }

    // MARK: PushSink

    /// Invariant 20: past `--max-queued-bytes` of what the kernel has refused, a live event is
    /// not queued; the subscription applies its policy.
    func send(_ event: PushEvent) -> SendOutcome {
        guard isWritable else { return .refused }
        if isOverLimit { return .overLimit }
        write(event)
        return .queued
    }

    /// What a subscriber is owed goes out whatever the subscription's policy, but not without
    /// bound: a client that reads nothing while it asks for snapshot after snapshot is closed as
    /// a slow consumer (invariant 28).
    @discardableResult
    func sendOwed(_ event: PushEvent) -> SendOutcome {
        guard isWritable else { return .refused }
        if isOverOwedLimit {
            closeSlowConsumer()
            return .overLimit
        }
        write(event)
        return .queued
    }

    /// Counts the refusal and ends the stream with its documented code, once.
    func closeSlowConsumer() {
        guard isWritable else { return }
        services.counters.refused(.slowConsumer)
        end(.slowConsumer)
    }

    /// Whether the bytes the kernel has refused on this connection are past `--max-queued-bytes`:
    /// the live stream's test, which a broadcast burst within one iteration does not trip.
    var isOverLimit: Bool { connection.backlogBytes > services.config.maxQueuedBytes }

    /// The test for what the client itself asked for (snapshots, replies): the kernel's share
    /// past `--max-queued-bytes`, or everything queued, this iteration's writes too, past four
    /// times it. A client's requests arrive many to a read, so the kernel's share alone would let
    /// one read queue without end; the factor lets a client that reads subscribe to a few stores
    /// larger than the limit at once.
    var isOverOwedLimit: Bool {
        let limit = services.config.maxQueuedBytes
        return connection.backlogBytes > limit || connection.queuedBytes > limit * Self.owedFactor
    }

    func endSlowConsumer(_ subscription: Subscription) {
        services.logger.debug(
            "slow consumer closed", metadata: ["target": "\(subscription.target)", "queued": "\(connection.queuedBytes)"])
        closeSlowConsumer()
    }

    // MARK: Subscriptions

    /// Subscribes this stream to `target` after the token and limit checks; with `presence`, the
    /// token must let it follow the target's members too.
    func subscribe(
        _ target: StreamTarget, since: UInt64?, epoch: String?, options: SubscriptionOptions, presence: Bool = false,
        granted: Bool = false
    ) -> ClientMessage.Problem? {
        guard !core.subscriptions.contains(where: { $0.target == target }) else {
            return ClientMessage.Problem(.alreadySubscribed, "this connection already subscribes to \(target)")
        }
        if let problem = core.permission(for: target, presence: presence, granted: granted, services: services) { return problem }
        var options = options
        if case .store(let name) = target, let cap = services.config.namespaces.maxRate(of: name), (options.maxRate ?? .infinity) > cap {
            // The namespace's rate: a subscription here gets at most that many frames a second.
            options = SubscriptionOptions(models: options.models, paths: options.paths, maxRate: cap, old: options.old)
        }
        let subscribed = services.hub.subscribe(
            self, to: target, since: since, epoch: epoch, options: options, presence: presence,
            joinedAt: Clock.microsecondsSinceEpoch())
        switch subscribed {
        case .success(let subscription):
            core.subscriptions.append(subscription)
            if granted { core.markHookGranted(subscription) }
            return nil
        case .failure(let problem):
            return problem
        }
    }

    func subscriptionEnded(_ subscription: Subscription) {
        _ = core.subscriptions.remove(where: { $0 === subscription })
    }

    func unsubscribe(_ target: StreamTarget) -> ClientMessage.Problem? {
        guard let subscription = core.subscriptions.remove(where: { $0.target == target }) else {
            return ClientMessage.Problem(.notSubscribed, "this connection does not subscribe to \(target)")
        }
        services.hub.unsubscribe(subscription)
        return nil
    }

    /// Ends each subscription the connection's token does not cover now (a new one was presented,
    /// with narrower grants), telling the client (`unsubscribed`, reason `forbidden`); those the
    /// subscribe hook allowed stay. Nothing ends when the gateway asks for no token.
    func endSubscriptionsNotCovered() {
        guard services.access.requiresToken else { return }
        let claims = core.claims
        let ended = core.subscriptions.filter { subscription in
            guard !core.isHookGranted(subscription) else { return false }
            guard let claims, claims.allows(subscription.target) else { return true }
            return subscription.followsPresence && !claims.allowsPresence(of: subscription.target)
        }
        for subscription in ended {
            _ = core.subscriptions.remove(where: { $0 === subscription })
            services.hub.unsubscribe(subscription)
            services.counters.refused(.tokenScope)
            sendOwed(PushEvent(name: "unsubscribed", id: nil, json: PushEncoder.unsubscribed(subscription.target, reason: "forbidden")))
        }
    }

    /// Ends the stream if its token ran out; the sweep asks before anything else.
    func expireTokenIfDue() -> Bool {
        guard core.tokenExpired(nowSeconds: AccessControl.nowSeconds()) else { return false }
        services.counters.refused(.tokenExpired)
        end(.tokenExpired)
        return true
    }

    // MARK: TCPConnectionDelegate (shared part)

    func connectionDidReadEOF(_ connection: TCPConnection) {
        // A peer that half-closes (a WebSocket without a close frame) gets nothing more.
        connection.close()
    }

    /// The socket caught up: conflated subscriptions send their catch-up now, and a presence
    /// follower that missed a frame the whole presence; one after another while the socket
    /// takes them. Past `--max-queued-bytes` the rest wait for the next drain, still conflating,
    /// so catch-ups never add up to a slow-consumer close, which a store subscriber never gets.
    func connectionDidDrain(_ connection: TCPConnection) {
        for subscription in core.subscriptions {
            if connection.isOverHighWater { break }
            services.hub.counters.conflatedChangeSets += subscription.flushConflated()
            subscription.flushPresence()
        }
    }

    // MARK: PushSink (presence)

    var clientID: UInt64 { core.clientID }
    var presenceUser: PresenceUser? { core.presenceUser }

    func connectionDidClose(_ connection: TCPConnection) {
        for subscription in core.subscriptions {
            services.hub.unsubscribe(subscription)
        }
        core.subscriptions.removeAll()
        services.owedAnswers.forget(connection)
        services.rpcWindows.forget(connection)
        services.closeWaits.forget(connection)
        services.table.sessionDidClose(connection)
    }
}
