/// A job as reported to clients.
public struct JobInfo: Sendable, Equatable {
    public let id: String
    public let kind: String
    public let store: String
    public let rate: Double
    public let state: JobState
    /// Change sets the job has committed.
    public let changes: Int
}
