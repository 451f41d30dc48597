/// Where a cluster node's topics come from: the engine that mirrors them from a shared log.
///
/// With one, a topic the hub creates starts unsynced until the source has read its history, and
/// a resume from a number this node has not reached yet waits for it instead of starting over.
///
/// Loop thread only.
public protocol TopicSource: AnyObject {
    /// Starts mirroring `name`; the source calls `PushHub.topicSynced` once it has read it.
    func watchTopic(_ name: String)
}
