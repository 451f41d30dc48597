import Glibc
@testable import ReceptionistDisk
@testable import ReceptionistModel
import Testing

/// When a data directory starts every store and topic in a new epoch: an unsynced stop on a new
/// boot, or on one that cannot be named, and a data file put back from a copy (invariant 51).
@Suite struct DiskEpochTests {
    @Test func anUnsyncedStopOnANewBootGivesEveryStoreAndTopicANewEpoch() throws {
        let directory = temporaryDirectory()
        let options = DiskOptions(directory: directory, fsync: .interval)
        let epoch = try Self.storeOneModel(options, topic: true)
        // A process that crashes on the same boot loses nothing: the epochs stay.
        let boot: String = try #require(DiskSchema.bootID())
        try Self.markUnclean(directory, boot: boot)
        do {
            let (engine, contents) = try DiskEngine.open(options)
            engine.close()
            #expect(!contents.newEpochs)
            #expect(contents.stores.first?.epoch == epoch)
        }
        // A machine that restarted may have lost what was not synced: new epochs, no history.
        try Self.markUnclean(directory, boot: "another-boot")
        let (engine, contents) = try DiskEngine.open(options)
        #expect(contents.newEpochs)
        let store = try #require(contents.stores.first)
        #expect(store.epoch != epoch && store.version == 1 && store.history.isEmpty)
        #expect(contents.topics.first?.epoch != "e1")
        engine.close()
        // The new epochs were stored.
        let (reopened, again) = try DiskEngine.open(options)
        reopened.close()
        #expect(again.stores.first?.epoch == store.epoch)
        #expect(!again.newEpochs)
    }

    /// A machine whose boot cannot be named (its boot id hidden) may have restarted: an unsynced
    /// stop gives new epochs, never the old ones over numbers that may have been lost.
    @Test func anUnsyncedStopOnABootThatCannotBeNamedGivesNewEpochs() throws {
        let directory = temporaryDirectory()
        var options = DiskOptions(directory: directory, fsync: .interval)
        options.bootIDFile = directory + "/no-boot-id"
        let epoch = try Self.storeOneModel(options)
        // A clean stop loses nothing, named boot or not.
        do {
            let (engine, contents) = try DiskEngine.open(options)
            engine.close()
            #expect(!contents.newEpochs && contents.stores.first?.epoch == epoch)
        }
        try Self.markUnclean(directory, boot: nil)
        let (engine, contents) = try DiskEngine.open(options)
        engine.close()
        #expect(contents.newEpochs)
        #expect(contents.stores.first.map { $0.epoch != epoch && $0.history.isEmpty } == true)
    }

    /// A data file put back from a copy (a backup) goes back in time under the same epochs: the
    /// directory's lock file names the run that last opened it, the copy an older one, so every
    /// store and topic starts a new epoch. A plain restart keeps them.
    @Test func aDataFilePutBackFromACopyGivesNewEpochs() throws {
        let directory = temporaryDirectory()
        let options = DiskOptions(directory: directory, fsync: .always)
        let file = directory + "/receptionist.sqlite3", copy = directory + "/backup.sqlite3"
        let epoch = try Self.storeOneModel(options)
        try Self.copyFile(file, to: copy)
        do {
            let (engine, contents) = try DiskEngine.open(options)
            #expect(!contents.newEpochs && contents.stores.first?.epoch == epoch, "a restart keeps its epochs")
            // The data file goes on past the copy.
            try StoreRegistry(journal: engine).create("t").commit([.put(model: "m", value: ["n": 2])])
            engine.close()
        }
        for suffix in ["", "-wal", "-shm"] { unlink(file + suffix) }
        try Self.copyFile(copy, to: file)
        let (engine, contents) = try DiskEngine.open(options)
        engine.close()
        #expect(contents.newEpochs && contents.replacedDataFile)
        #expect(contents.stores.map(\.name) == ["s"])
        #expect(contents.stores.first.map { $0.epoch != epoch && $0.version == 1 } == true)
        let (again, reopened) = try DiskEngine.open(options)
        again.close()
        #expect(!reopened.newEpochs, "the new epochs were stored, and the directory now names this file")
    }

    /// A start records its run in the lock file beside the earlier one before it writes it into
    /// the data file: one that fails or dies between the two (a full disk, a kill) leaves a data
    /// file naming a run the lock file names too, which is no copy put back; a run it does not
    /// name still is.
    @Test func aDataFileNamingTheRunAFailedStartWasWritingKeepsItsEpochs() throws {
        let directory = temporaryDirectory()
        let options = DiskOptions(directory: directory, fsync: .always)
        let epoch = try Self.storeOneModel(options)
        let earlier = try DataDirectoryLock(directory: directory).lives
        #expect(earlier.count == 1)
        try Self.nameRun("failed-start", in: directory, lockNames: earlier + ["failed-start"])
        let (engine, contents) = try DiskEngine.open(options)
        engine.close()
        #expect(!contents.newEpochs && contents.stores.first?.epoch == epoch)
        #expect(try DataDirectoryLock(directory: directory).lives.count == 1, "the open names its own run alone")
        try Self.nameRun("elsewhere", in: directory, lockNames: nil)
        let (again, reopened) = try DiskEngine.open(options)
        again.close()
        #expect(reopened.replacedDataFile && reopened.stores.first?.epoch != epoch)
    }

    /// Makes the data file name `run`, and the lock file `lockNames` (nil: as it was).
    private static func nameRun(_ run: String, in directory: String, lockNames: [String]?) throws {
        let db = try SQLiteDatabase(path: directory + "/receptionist.sqlite3")
        defer { db.close() }
        try db.execute("UPDATE meta SET value = '\(run)' WHERE key = 'life';")
        if let lockNames { try DataDirectoryLock(directory: directory).record(lives: lockNames) }
    }

    /// Runs a data directory once: store `s` made with one model (and topic `t` with one
    /// message), then a clean stop. Returns the store's epoch.
    private static func storeOneModel(_ options: DiskOptions, topic: Bool = false) throws -> String {
        let (engine, _) = try DiskEngine.open(options)
        defer { engine.close() }
        let store = try StoreRegistry(journal: engine).create("s")
        try store.commit([.put(model: "m", value: ["n": 1])])
        if topic { #expect(append(engine, "t", seq: 1) == .stored) }
        return store.epoch
    }

    private static func copyFile(_ from: String, to: String) throws {
        guard let source = fopen(from, "rb"), let target = fopen(to, "wb") else { throw POSIXErrorLike(errno) }
        defer { fclose(source); fclose(target) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let read = fread(&buffer, 1, buffer.count, source)
            if read == 0 { break }
            _ = fwrite(buffer, 1, read, target)
        }
    }

    private struct POSIXErrorLike: Error { let code: Int32; init(_ code: Int32) { self.code = code } }

    /// Marks the data file as left by a process that stopped without syncing, on `boot` (nil:
    /// the boot the gateway wrote down itself).
    private static func markUnclean(_ directory: String, boot: String?) throws {
        let db = try SQLiteDatabase(path: directory + "/receptionist.sqlite3")
        defer { db.close() }
        try db.execute("UPDATE meta SET value = '0' WHERE key = 'clean';")
        if let boot { try db.execute("UPDATE meta SET value = '\(boot)' WHERE key = 'boot';") }
    }
}
