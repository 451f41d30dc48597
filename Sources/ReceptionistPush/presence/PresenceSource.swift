import ReceptionistWire

/// Where the nodes of a cluster share their presence (Redis, in the gateway): each node keeps
/// one entry per topic or store it has members of, and a node that stops beating its heart is
/// taken out by the others.
///
/// The loop thread only.
public protocol PresenceSource: AnyObject {
    /// Stores this node's entry for `target` (nil: it has no members there any more) and tells
    /// the other nodes that it changed.
    func sharePresence(_ target: StreamTarget, entry: [UInt8]?)

    /// The entries of the other live nodes for `target`, by node; `done` runs once, on the loop,
    /// with nil when they could not be read (in time).
    func readPresence(_ target: StreamTarget, done: @escaping ([String: [UInt8]]?) -> Void)
}

/// The hub's link between its presences and the cluster: every presence it makes registers here,
/// so the cluster can reach them by target (a node's entry changed, a node died, Redis is back).
///
/// The loop thread only.
public final class PresenceRelay {
    public weak var source: (any PresenceSource)?
    private var presences: [StreamTarget: WeakPresence] = [:]

    public init() {}

    func register(_ presence: Presence) {
        presences[presence.target] = WeakPresence(presence)
    }

    /// From a presence's `deinit`: its weak entry reads nil by then. One made since for the same
    /// target (a store made anew) has replaced it and stays.
    func unregister(_ target: StreamTarget) {
        if presences[target]?.presence == nil { presences.removeValue(forKey: target) }
    }

    /// Another node's entry for `target` changed: a presence that is followed here reads again.
    public func changed(_ target: StreamTarget) {
        presences[target]?.presence?.refreshIfFollowed()
    }

    /// These nodes stopped beating on the server that keeps the presences of the targets
    /// `belongs` names: their members leave those presences here. (A node cut off from one server
    /// still beats on the others, and its members there stay.)
    public func nodesLost(_ nodes: Set<String>, where belongs: (String) -> Bool = { _ in true }) {
        guard !nodes.isEmpty else { return }
        for (target, entry) in presences where belongs(target.name) { entry.presence?.dropNodes(nodes) }
    }

    /// Every presence shares its entry now (nil where it has no members left): at shutdown,
    /// so this node's members leave the other nodes' presence at once, not by time-out.
    public func shareAll() {
        for entry in presences.values { entry.presence?.share() }
    }

    /// Redis may have lost this node's entries (it was away, or took this node for dead): every
    /// presence shares its entry again, and a followed one reads the others again. `belongs`
    /// narrows it to the names that live on one server.
    public func reshare(where belongs: (String) -> Bool = { _ in true }) {
        for (target, entry) in presences {
            guard belongs(target.name), let presence = entry.presence else { continue }
            presence.share()
            presence.refreshIfFollowed()
        }
    }

    private struct WeakPresence {
        weak var presence: Presence?
        init(_ presence: Presence) { self.presence = presence }
    }
}
