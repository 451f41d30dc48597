/// What a presence follower holds: the list, the counts, or nothing it can trust (`stale`: it
/// missed a frame, and gets the whole presence once its connection drains).
///
/// Loop thread only.
final class PresenceWatch {
    enum State {
        case list
        case counts
        case stale
    }

    weak var presence: Presence?
    /// Stale until the first frame is queued.
    var state = State.stale
}
