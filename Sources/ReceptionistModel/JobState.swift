/// Where a job is in its life.
public enum JobState: Sendable, Equatable {
    case running
    case stopped
    case failed(String)

    public var name: String {
        switch self {
        case .running: "running"
        case .stopped: "stopped"
        case .failed: "failed"
        }
    }
}
