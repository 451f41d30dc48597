/// What the gateway counts for `/metrics`. Loop thread only: plain integers, no locks, so that
/// counting costs the fan-out path one add.
final class GatewayCounters {
    private(set) var refusals = [Int](repeating: 0, count: Refusal.allCases.count)
    var httpRequests = 0
    /// Protocol messages WebSocket clients sent.
    var webSocketMessagesIn = 0
    /// Server messages written to WebSocket and SSE streams (deliveries, snapshots, replies).
    var webSocketMessagesOut = 0
    var sseMessagesOut = 0
    /// Change sets and topic messages handed to a subscriber (each subscriber counts once).
    var deliveries = 0
    /// Change sets a slow subscriber got folded into one conflated message.
    var conflatedChangeSets = 0
    var storeResumes = 0
    var topicResumes = 0
    /// Resumes answered with a fresh snapshot because the change sets were no longer kept.
    var resets = 0
    /// Resumes that reported messages no longer kept as a gap.
    var gaps = 0
    var topicPublishes = 0
    var changeSetsFannedOut = 0

    func refused(_ reason: Refusal) {
        refusals[Self.index[reason]!] += 1
    }

    func count(_ reason: Refusal) -> Int { refusals[Self.index[reason]!] }

    private static let index: [Refusal: Int] = Dictionary(
        uniqueKeysWithValues: Refusal.allCases.enumerated().map { ($1, $0) })
}
