/// How presence is delivered (`--presence-interval`, `--presence-max-members`).
public struct PresenceSettings: Sendable, Equatable {
    /// Joins and leaves are collected for this long from the first one, then sent as one frame.
    public var intervalSeconds: Double
    /// Past this many members, presence subscribers get the counts only.
    public var maxMembers: Int

    public init(intervalSeconds: Double = 1, maxMembers: Int = 1000) {
        self.intervalSeconds = intervalSeconds
        self.maxMembers = maxMembers
    }
}
