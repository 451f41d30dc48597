import Foundation
import Glibc
import Logging
@testable import ReceptionistGateway
import ReceptionistDisk
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistTestSupport
import Testing

/// The engine seam's start, on a real data directory and loop (not run).
@Suite struct GatewayEngineTests {
    /// What the data directory held is put back, then let go: it held every change set `--retain`
    /// kept and every message as read, for the life of the process, where a store's ring keeps
    /// only `--history-bytes` of them.
    @Test func whatTheDiskHeldIsLetGoOncePutBack() throws {
        var template = Array("/tmp/receptionist-engine-XXXXXX".utf8CString)
        let directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let options = DiskOptions(directory: directory)
        do {
            let (disk, _) = try DiskEngine.open(options)
            let store = try StoreRegistry(journal: disk).create("s")
            _ = try store.commit([.put(model: "m", value: ["n": 1])])
            disk.close()
        }
        var config = GatewayConfig()
        config.disk = options
        let loop = try EventLoop()
        let engine = GatewayEngine(config: config, opened: try DiskEngine.open(options), loop: loop)
        #expect(engine.contents?.stores.map(\.name) == ["s"])
        let hub = PushHub(stores: engine.stores, context: ManualContext(), historyLimit: 10, counters: PushCounters())
        _ = try engine.start(config, hub: hub, loop: loop, logger: Logger(label: "engine"))
        #expect(engine.contents == nil)
        #expect(engine.stores.store("s")?.version == 1)
        engine.close(logger: Logger(label: "engine"))
        loop.mailbox.shutDown()
        loop.run()
    }
}
