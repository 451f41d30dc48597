/// The epochs a topic's mirror or a store's replica may not take again: the one it saw go back (a
/// number after one it had read: Redis came back with older data), and the last few it left. Seen
/// again, Redis went back past a renewal. The scripts that read a topic's tail or a store whole
/// are given them (`list`) and renew such an epoch in Redis, once for every node.
///
/// Pure value.
struct RetiredEpochs: Equatable {
    /// How many epochs left are kept: more than Redis goes back in a row.
    static let kept = 4

    var wentBack: String?
    private(set) var leftBehind: [String] = []

    /// The follower moved on from `epoch`.
    mutating func leave(_ epoch: String) {
        leftBehind.removeAll { $0 == epoch }
        leftBehind.append(epoch)
        if leftBehind.count > Self.kept { leftBehind.removeFirst() }
    }

    func left(_ epoch: String) -> Bool {
        leftBehind.contains(epoch)
    }

    /// Every epoch that may not be taken, joined by commas (epochs hold none), for a script.
    var list: String {
        ((wentBack.map { [$0] } ?? []) + leftBehind).joined(separator: ",")
    }
}
