import Glibc

/// An exclusive lock on a data directory (`flock` on its `lock` file), held while the gateway
/// runs: a second process on the same directory is refused at start. The kernel drops it when
/// the process ends, however it ends.
///
/// The file also says whether the directory ever held a database (`heldData`, `markHeldData`):
/// a database file gone or emptied since is then refused, not taken for a new one.
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

    func release() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
