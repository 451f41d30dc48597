/// What the operations part asks of a shared engine for `/readyz` and `/metrics`.
///
/// Loop thread only.
protocol EngineHealth: AnyObject {
    /// The engine's name in `/readyz` (`"redis"`).
    var name: String { get }
    /// Whether every connection the engine needs is up.
    var isUp: Bool { get }
    /// Why it is down (the last connection error, or "connecting"); nil while up.
    var downReason: String? { get }
    /// Commands sent to the engine whose replies are still owed.
    var pendingCommands: Int { get }
}
