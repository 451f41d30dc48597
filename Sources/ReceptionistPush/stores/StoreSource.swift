import ReceptionistModel

/// Where a node's store replicas come from, as the push core sees it: the shared log (Redis, in
/// the gateway), which keeps more change sets than a replica's own history.
///
/// The loop thread only.
public protocol StoreSource: AnyObject {
    /// The change sets `after + 1 ... through` of `store` that the shared log still holds, oldest
    /// first, each as its observers saw it; `done` runs once, on the loop, with nil when the log
    /// could not be read (in time).
    func storeHistory(of store: String, after: UInt64, through: UInt64, done: @escaping ([ChangeSet]?) -> Void)
}
