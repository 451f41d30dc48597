/// The most recent change sets of a store, oldest first, up to `capacity`.
struct ChangeHistory {
    let capacity: Int
    private var ring: [ChangeSet] = []
    private var start = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    mutating func append(_ changeSet: ChangeSet) {
        guard capacity > 0 else { return }
        if ring.count < capacity {
            ring.append(changeSet)
        } else {
            ring[start] = changeSet
            start = (start + 1) % capacity
        }
    }

    /// The change sets after `version`, in order; nil if some of them are no longer kept.
    func since(_ version: UInt64, current: UInt64) -> [ChangeSet]? {
        if version >= current { return [] }
        guard let oldest = ring.isEmpty ? nil : ring[start].version, version + 1 >= oldest else { return nil }
        var result: [ChangeSet] = []
        result.reserveCapacity(Int(current - version))
        for i in 0..<ring.count {
            let changeSet = ring[(start + i) % ring.count]
            if changeSet.version > version { result.append(changeSet) }
        }
        return result
    }
}
