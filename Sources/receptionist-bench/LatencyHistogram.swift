/// Latencies in microseconds, in log-linear buckets: exact below 16 µs, then 16 buckets per power
/// of two (about 6% wide), so percentiles stay within a few percent at any scale while recording
/// is one array increment. Fixed bucket edges let several client processes' histograms be merged.
struct LatencyHistogram {
    static let subBuckets = 16
    private(set) var counts = [Int](repeating: 0, count: 16 + 60 * 16)
    private(set) var total = 0

    /// Negative values (clocks a little apart) count as zero.
    mutating func record(_ microseconds: Int64) {
        counts[Self.index(of: max(0, microseconds))] += 1
        total += 1
    }

    /// Adds another histogram's recordings to this one.
    mutating func add(_ other: LatencyHistogram) {
        for index in counts.indices { counts[index] += other.counts[index] }
        total += other.total
    }

    static func index(of value: Int64) -> Int {
        if value < Int64(subBuckets) { return Int(value) }
        let exponent = 63 - value.leadingZeroBitCount  // floor(log2), at least 4 here
        let shift = exponent - 4
        let sub = Int(value >> Int64(shift)) & (subBuckets - 1)
        return subBuckets + shift * subBuckets + sub
    }

    /// The middle of bucket `index`, in microseconds.
    static func value(at index: Int) -> Double {
        if index < subBuckets { return Double(index) }
        let shift = (index - subBuckets) / subBuckets
        let sub = (index - subBuckets) % subBuckets
        let low = Double((subBuckets + sub) << shift)
        let width = Double(1 << shift)
        return low + width / 2
    }

    /// The value below which `fraction` of the recordings fall, in microseconds; 0 when empty.
    func percentile(_ fraction: Double) -> Double {
        guard total > 0 else { return 0 }
        let rank = max(1, Int((fraction * Double(total)).rounded(.up)))
        var seen = 0
        for (index, count) in counts.enumerated() where count > 0 {
            seen += count
            if seen >= rank { return Self.value(at: index) }
        }
        return Self.value(at: counts.count - 1)
    }

    /// The non-empty buckets as `"middle µs":count` pairs of a JSON object, for merging across processes.
    var sparseJSON: String {
        let pairs = counts.enumerated().filter { $0.element > 0 }.map { "\"\(Self.value(at: $0.offset))\":\($0.element)" }
        return "{" + pairs.joined(separator: ",") + "}"
    }
}
