/// Which of the cluster's Redis servers holds a topic or a store: a jump consistent hash
/// (Lamping and Veach, 2014) of the FNV-1a hash of its name, over the servers in the order
/// `--redis-url` lists them. Every node must list them in the same order. Adding a server at the
/// end moves only the names that go to it (about 1 in n+1), as Centrifugo's Redis sharding does.
///
/// Pure.
enum ShardMap {
    static func index(of name: String, shards: Int) -> Int {
        guard shards > 1 else { return 0 }
        return jump(fnv1a(name), buckets: shards)
    }

    /// FNV-1a, 64 bits, of the name's UTF-8: stable across processes and builds, unlike `hashValue`.
    static func fnv1a(_ name: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    static func jump(_ key: UInt64, buckets: Int) -> Int {
        var key = key
        var bucket: Int64 = -1
        var next: Int64 = 0
        while next < Int64(buckets) {
            bucket = next
            key = key &* 2_862_933_555_777_941_757 &+ 1
            next = Int64(Double(bucket + 1) * (Double(Int64(1) << 31) / Double((key >> 33) + 1)))
        }
        return Int(bucket)
    }
}
