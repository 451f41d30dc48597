import Foundation
import Glibc
import ReceptionistModel
import ReceptionistSync

/// The test process's one directory under the system's temporary folder, removed with everything
/// in it when the process exits: a run leaves nothing behind.
private let testRunDirectory: String = {
    let path = makeDirectory(template: "/tmp/receptionist-disk-XXXXXX")
    atexit { try? FileManager.default.removeItem(atPath: testRunDirectory) }
    return path
}()

private func makeDirectory(template: String) -> String {
    var bytes = Array(template.utf8CString)
    return bytes.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
}

/// A fresh directory of its own, inside the test process's one.
func temporaryDirectory() -> String {
    makeDirectory(template: testRunDirectory + "/XXXXXX")
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
