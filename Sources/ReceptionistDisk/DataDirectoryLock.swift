import Glibc

/// An exclusive lock on a data directory (`flock` on its `lock` file), held while the gateway
/// runs: a second process on the same directory is refused at start. The kernel drops it when
/// the process ends, however it ends.
final class DataDirectoryLock {
    private var descriptor: Int32

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

    func release() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
