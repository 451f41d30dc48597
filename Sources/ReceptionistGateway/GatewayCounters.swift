/// Counts the gateway keeps for `/metrics` and the logs. Loop thread only: plain integers, no locks.
final class GatewayCounters {
    private(set) var refusals = [Int](repeating: 0, count: Refusal.allCases.count)

    func refused(_ reason: Refusal) {
        refusals[Self.index[reason]!] += 1
    }

    func count(_ reason: Refusal) -> Int { refusals[Self.index[reason]!] }

    private static let index: [Refusal: Int] = Dictionary(
        uniqueKeysWithValues: Refusal.allCases.enumerated().map { ($1, $0) })
}
