import Glibc
import ReceptionistModel
import ReceptionistSync

/// A fresh directory under the system's temporary folder.
func temporaryDirectory() -> String {
    var template = Array("/tmp/receptionist-disk-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
}

/// An observer of `store` that, on its first change set, says so through `entered` and blocks
/// until `gate` opens.
func blockingObserver(of store: ModelStore) -> (gate: ConditionLock<Bool>, entered: ConditionLock<Bool>, token: ObservationToken) {
    let gate = ConditionLock(false)
    let entered = ConditionLock(false)
    let token = store.observe { _ in
        entered.withLock { $0 = true }
        entered.broadcast()
        gate.wait(until: { $0 }, then: { _ in })
    }
    return (gate, entered, token)
}
