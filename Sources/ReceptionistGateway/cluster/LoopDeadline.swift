import ReceptionistLoop

/// Work answered later on the loop (by Redis), bounded: `done` gets the work's answer or, once
/// the deadline passes first, the stand-in; exactly once either way. A late answer is dropped.
///
/// Loop thread only.
enum LoopDeadline {
    static func run<T>(
        _ loop: EventLoop, seconds: Double, timedOut: @escaping () -> T, _ start: (@escaping (T) -> Void) -> Void,
        done: @escaping (T) -> Void
    ) {
        let answer = Once(done)
        var timer: LoopTimer?
        timer = LoopTimer(loop: loop) {
            timer?.close()
            timer = nil
            answer.give(timedOut())
        }
        timer?.start(delayMilliseconds: UInt64(max(0, seconds) * 1000))
        start { value in
            timer?.close()
            timer = nil
            answer.give(value)
        }
    }

    /// An answer handed on at most once.
    private final class Once<T> {
        private var done: ((T) -> Void)?
        init(_ done: @escaping (T) -> Void) { self.done = done }

        func give(_ value: T) {
            let done = self.done
            self.done = nil
            done?(value)
        }
    }
}
