import Glibc
@testable import ReceptionistDisk
@testable import ReceptionistModel
import Testing

/// A data file gone or emptied where a database was: SQLite would take it for a new one (and
/// throw away the log beside it), and every store and topic would be lost in silence.
@Suite struct DiskEmptiedFileTests {
    private func directoryWithAStore() throws -> String {
        let directory = temporaryDirectory()
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
        let stores = StoreRegistry(historyLimit: 10, journal: engine)
        try stores.create("orders").commit([.put(model: "o1", value: ["n": 1])])
        engine.close()
        return directory
    }

    private func refusal(_ directory: String) -> String? {
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            engine.close()
            return nil
        } catch {
            return error.description
        }
    }

    /// Truncated to nothing, then removed: it was opened as a new, empty database.
    @Test func aFileEmptiedOrRemovedIsRefused() throws {
        let directory = try directoryWithAStore()
        let path = directory + "/receptionist.sqlite3"
        #expect(truncate(path, 0) == 0)
        #expect(refusal(directory)?.contains("is empty, but the data directory held a database") == true)
        #expect(unlink(path) == 0)
        #expect(refusal(directory)?.contains("is missing, but the data directory held a database") == true)
    }

    /// An empty file beside a log that holds data (a file lost after a crash), in a directory
    /// whose lock file says nothing: the log alone is enough to refuse it.
    @Test func anEmptyFileBesideALogIsRefused() throws {
        let directory = temporaryDirectory()
        let path = directory + "/receptionist.sqlite3"
        for (file, bytes) in [(path, 0), (path + "-wal", 4096)] {
            let descriptor = open(file, O_WRONLY | O_CREAT, 0o644)
            #expect(ftruncate(descriptor, off_t(bytes)) == 0)
            close(descriptor)
        }
        #expect(refusal(directory)?.contains("its write-ahead log is still there") == true)
    }

    /// An empty file in a directory no database was made in (a first start that stopped before
    /// it wrote one) is a new database, and the next start opens it as ours.
    @Test func anEmptyFileNeverWrittenIsANewDatabase() throws {
        let directory = temporaryDirectory()
        close(open(directory + "/receptionist.sqlite3", O_WRONLY | O_CREAT, 0o644))
        close(open(directory + "/lock", O_WRONLY | O_CREAT, 0o644))
        #expect(refusal(directory) == nil)
        #expect(refusal(directory) == nil)
    }
}
