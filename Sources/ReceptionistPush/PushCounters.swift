/// What the push core counts for `/metrics`. Loop thread only: plain integers, so that counting
/// costs the fan-out path one add (invariant 24).
public final class PushCounters {
    /// Change sets and topic messages handed to a subscriber (each subscriber counts once).
    public var deliveries = 0
    /// Change sets a slow subscriber got folded into one conflated message.
    public var conflatedChangeSets = 0
    public var storeResumes = 0
    public var topicResumes = 0
    /// Resumes answered with a fresh snapshot because the change sets were no longer kept.
    public var resets = 0
    /// Resumes that reported messages no longer kept as a gap.
    public var gaps = 0
    public var topicPublishes = 0
    /// Topics forgotten after `--topic-ttl` of quiet, with their history.
    public var topicsForgotten = 0
    public var changeSetsFannedOut = 0
    /// Presence frames queued to followers (each follower counts once).
    public var presenceFrames = 0

    public init() {}
}
