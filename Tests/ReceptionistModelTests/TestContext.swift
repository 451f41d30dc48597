import Dispatch
import Glibc
import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync

/// A serial queue standing in for the loop as a receptionist's target.
final class QueueContext: ExecutionContext {
    let queue = DispatchQueue(label: "target")
    let wakeups = PThreadLock(0)

    func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        wakeups.withLock { $0 += 1 }
        queue.async(execute: job)
        return true
    }

    func after(_ delaySeconds: Double, _ job: @escaping @Sendable () -> Void) {
        queue.asyncAfter(deadline: .now() + delaySeconds, execute: job)
    }
}

/// Applies a delivered change to a copy of the models, as a subscriber would.
func apply(_ change: ModelChange, to models: inout [String: JSONValue]) {
    if change.keyPath.components.isEmpty {
        models[change.model] = change.newValue
    } else {
        var model = models[change.model] ?? .object([:])
        model.setValue(change.newValue, at: change.keyPath.components[...])
        models[change.model] = model
    }
}

/// Scales the stress tests: 1 normally, less under ThreadSanitizer (set by `make test`).
let stressScale: Double = {
    guard let raw = getenv("RECEPTIONIST_STRESS_SCALE"), let value = Double(String(cString: raw)) else { return 1 }
    return value
}()

/// Polls `condition` until it holds or `seconds` pass; returns whether it held. A bounded wait on a
/// real condition, not a sleep.
func eventually(seconds: Double = 30, _ condition: () -> Bool) -> Bool {
    let deadline = DispatchTime.now() + seconds
    while DispatchTime.now() < deadline {
        if condition() { return true }
        usleep(1_000)
    }
    return condition()
}
