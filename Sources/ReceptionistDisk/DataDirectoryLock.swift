import Glibc

/// An exclusive lock on a data directory (`flock` on its `lock` file), held while the gateway
/// runs: a second process on the same directory is refused at start. The kernel drops it when
/// the process ends, however it ends.
///
/// The file also says whether the directory ever held a database (`heldData`, `markHeldData`):
/// a database file gone or emptied since is then refused, not taken for a new one; and which run
/// last opened it (`lives`): a database put back from a copy names an older run.
final class DataDirectoryLock {
    private var descriptor: Int32
    private static let marker = Array("receptionist data directory\n".utf8)

    init(directory: String) throws(DiskError) {
        let path = directory + "/lock"
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw DiskError("cannot open \(path): \(String(cString: strerror(errno)))") }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another gateway process is using it" : String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw DiskError("the data directory \(directory) is locked: \(reason)")
        }
    }

    /// Whether a gateway made a database in this directory before.
    var heldData: Bool {
        var content = [UInt8](repeating: 0, count: Self.marker.count)
        let count = pread(descriptor, &content, content.count, 0)
        return count == content.count && content == Self.marker
    }

    /// Records, durably, that the directory holds a database.
    func markHeldData() throws(DiskError) {
        guard !heldData else { return }
        guard pwrite(descriptor, Self.marker, Self.marker.count, 0) == Self.marker.count, fsync(descriptor) == 0 else {
            throw DiskError("cannot write the data directory's lock file: \(String(cString: strerror(errno)))")
        }
    }

    /// The runs of the gateway the database here may name (`DiskMeta.life`), as the line after
    /// the marker says: the one that last opened it; while a start is writing its own run into
    /// the database, that one too (`record(lives:)`). Empty if none was recorded.
    var lives: [String] {
        var content = [UInt8](repeating: 0, count: Self.marker.count + 256)
        let count = pread(descriptor, &content, content.count, 0)
        guard heldData, count > Self.marker.count else { return [] }
        let line = content[Self.marker.count..<count].prefix { $0 != UInt8(ascii: "\n") }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("life ") else { return [] }
        return text.dropFirst(5).split(separator: " ").map(String.init)
    }

    /// Records, durably, the runs the database may name from now on. A start records its own run
    /// beside the earlier one before it writes its run into the database, and alone after: a
    /// start that fails or dies between the two (a full disk, a kill) leaves a database that
    /// either run may name, never one taken for a copy put back.
    func record(lives: [String]) throws(DiskError) {
        let content = Self.marker + Array("life \(lives.joined(separator: " "))\n".utf8)
        guard pwrite(descriptor, content, content.count, 0) == content.count, ftruncate(descriptor, off_t(content.count)) == 0,
            fsync(descriptor) == 0
        else {
            throw DiskError("cannot write the data directory's lock file: \(String(cString: strerror(errno)))")
        }
    }

    func release() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
