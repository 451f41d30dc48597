/// Why a commit or lookup failed. A failed commit changed nothing.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case noSuchStore(String)
    case storeExists(String)
    case invalidStoreName(String)
    case noSuchModel(String)
    case invalidModelID(String)
    case notAnObject(String)
    /// A value a model may not hold (`ModelValueRules`).
    case invalidValue(String)
    case emptyCommit
    /// A commit from inside an observer of the same store would notify out of version order.
    case reentrantCommit
    /// The shared log (Redis), or the disk's writer, cannot take the write; nothing was acknowledged.
    case unavailable(String)
    /// The write was sent, but whether it was applied is not known (the answer was lost, or
    /// came too late): it may reach every subscriber yet. Answered 503 like `unavailable`.
    case outcomeUnknown(String)
    /// A conditional commit's condition did not hold (`CommitCondition`); nothing was applied.
    /// `version` is the store's version it was checked against.
    case preconditionFailed(String, version: UInt64)
    /// A read of the past reached further back than the store keeps: `oldest` is the oldest
    /// version that can still be read (`?at=`) or resumed after (`after=`).
    case gone(String, oldest: UInt64)
    /// A read of the past asked for what cannot be (a version the store has not reached).
    case invalidRead(String)
    /// Durable storage refused the write (the disk is full, or failed); nothing was applied.
    case storageFailed(String)
    /// One of the gateway's limits is reached (`--max-topics`); nothing was applied. Answered
    /// 503 `over_capacity` (over WebSocket, `unavailable`).
    case overCapacity(String)

    public var description: String {
        switch self {
        case .noSuchStore(let name): "no store named '\(name)'"
        case .storeExists(let name): "a store named '\(name)' already exists"
        case .invalidStoreName(let name): "'\(name)' is not a valid store name: use 1 to 64 of A-Z a-z 0-9 _ . -, not . or .."
        case .noSuchModel(let id): "no model '\(id)'"
        case .invalidModelID(let id): "'\(id)' is not a valid model id: use 1 to 128 bytes of UTF-8 without '/' or control characters, other than '.' and '..'"
        case .notAnObject(let what): "\(what) must be a JSON object"
        case .invalidValue(let why): why
        case .emptyCommit: "a change set needs at least one change"
        case .reentrantCommit: "an observer may not commit to the store it observes; hand the work to a job"
        case .unavailable(let reason): "the store is unavailable: \(reason)"
        case .outcomeUnknown(let reason): "the store did not confirm the write: \(reason)"
        case .preconditionFailed(let detail, _): "precondition failed: \(detail)"
        case .gone(let detail, _): detail
        case .invalidRead(let detail): detail
        case .storageFailed(let reason): "the write could not be stored: \(reason)"
        case .overCapacity(let reason): reason
        }
    }
}
