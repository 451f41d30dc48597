/// Numbers one topic's messages while they wait for the disk (`DiskTopicLog`): each takes the
/// number after the last handed out, or after the last stored when none waits. If the disk
/// refuses one, it and every later one of the same numbering are refused (the writer refuses a
/// message that does not follow on), and numbering starts again after the last stored: a new run.
/// The refusals of the old run's later messages start none, or a message of the new run would be
/// given a number already handed out, and refused in turn.
///
/// Pure value.
struct DiskTopicNumbers {
    /// The last number handed out while messages wait; nil once none does.
    private var handedOut: UInt64?
    private var waiting = 0
    private var run: UInt64 = 0

    /// Whether no message waits for the disk: the topic's own number is then the last.
    var isIdle: Bool { waiting == 0 }

    /// The next message's number, and the run it is numbered in; `stored`: the topic's last
    /// stored number.
    mutating func next(after stored: UInt64) -> (seq: UInt64, run: UInt64) {
        let seq = (handedOut ?? stored) + 1
        handedOut = seq
        waiting += 1
        return (seq, run)
    }

    /// A message numbered in `answeredRun` was stored, or `failed`; `stored` is the topic's last
    /// stored number now.
    mutating func answered(run answeredRun: UInt64, failed: Bool, stored: UInt64) {
        waiting -= 1
        if failed && answeredRun == run {
            run += 1
            handedOut = stored
        }
        if waiting == 0 { handedOut = nil }
    }
}
