/// The backend's hooks (`docs/HOOKS.md`): which are called, at which URL, and how calls are bounded.
public struct HookSettings: Sendable {
    /// Each hook's URL; a hook without one is not called.
    public var urls: [HookKind: String] = [:]
    /// A call not answered within this long is taken as failed: the client is told `unavailable`.
    public var timeoutSeconds = 2.0
    /// Calls under way at once; more wait in a queue of `maxQueued`.
    public var maxInFlight = 256
    /// Calls that may wait for one of `maxInFlight`; past it a client is answered `unavailable` at once.
    public var maxQueued = 10_000
    /// Request headers, besides `Cookie` and `Authorization`, passed to the connect hook.
    public var forwardHeaders: [String] = []

    public init() {}

    public func url(_ kind: HookKind) -> String? { urls[kind] }
}

/// The calls the gateway makes to the application's backend.
public enum HookKind: String, CaseIterable, Sendable {
    case connect, subscribe, publish, write, rpc, refresh
}
