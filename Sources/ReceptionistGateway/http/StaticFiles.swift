import Glibc
import ReceptionistLoop
import ReceptionistSync
import ReceptionistWire

/// The public directory, read into memory once at start-up so serving never blocks the loop.
///
/// Invariant: only regular files whose real path lies inside the real public root are loaded, so
/// a symlink out of the root is never served. A hidden file or directory (its name starts with
/// `.`: `.git`, `.env`, an editor's swap file) is left out too, except `.well-known` (RFC 8615),
/// whose files are meant to be served. Request paths are decoded by `RequestPath`, which
/// refuses `..`, NUL bytes and encoded separators before any lookup.
///
/// Immutable after loading; read on the loop thread.
final class StaticFiles {
    struct File {
        let body: SharedBytes
        let contentType: String
        let etag: String
    }

    struct LoadLimits {
        var maxFileBytes = 16 * 1024 * 1024
        var maxTotalBytes = 128 * 1024 * 1024
        var maxDepth = 16
    }

    private(set) var files: [String: File] = [:]
    private(set) var totalBytes = 0
    /// The files left out, with why: over a limit, or unreadable (the gateway says so at start).
    private(set) var skipped: [String] = []

    /// Loads every file under `directory`. A missing directory yields an empty set.
    init(directory: String, limits: LoadLimits = LoadLimits()) {
        guard let root = Self.realPath(directory) else { return }
        walk(directory: root, relative: "", root: root, depth: 0, limits: limits)
    }

    var isEmpty: Bool { files.isEmpty }

    private func walk(directory: String, relative: String, root: String, depth: Int, limits: LoadLimits) {
        guard depth <= limits.maxDepth, let handle = opendir(directory) else { return }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if Self.isServed(name) { names.append(name) }
        }
        for name in names.sorted() {
            let path = directory + "/" + name
            let key = relative.isEmpty ? name : relative + "/" + name
            guard let real = Self.realPath(path), real == root || real.hasPrefix(root + "/") else { continue }
            var info = stat()
            guard stat(real, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                walk(directory: real, relative: key, root: root, depth: depth + 1, limits: limits)
            case S_IFREG:
                let size = Int(info.st_size)
                guard size <= limits.maxFileBytes else { skipped.append("\(key): over \(limits.maxFileBytes) bytes"); continue }
                guard totalBytes + size <= limits.maxTotalBytes else {
                    skipped.append("\(key): past \(limits.maxTotalBytes) bytes of files in all"); continue
                }
                guard let bytes = Self.read(real, size: size) else { skipped.append("\(key): cannot be read"); continue }
                totalBytes += bytes.count
                let tag = "\"" + String(SHA1.hex(bytes).prefix(20)) + "\""
                files[key] = File(body: SharedBytes(bytes), contentType: ContentType.forPath(key), etag: tag)
            default:
                continue
            }
        }
    }

    /// Whether a directory entry named `name` is looked at: not `.` and `..`, nor a hidden one
    /// other than `.well-known`.
    static func isServed(_ name: String) -> Bool {
        !name.hasPrefix(".") || name == ".well-known"
    }

    /// Answers a GET or HEAD for `path`, honouring `If-None-Match`.
    func reply(for request: HTTPRequest) -> Reply {
        let path: RequestPath
        do {
            path = try RequestPath(raw: request.rawPath)
        } catch {
            // A client probing for a way out of the root gets no second request on this connection.
            return Reply(.error(.badRequest, "the path is not allowed: \(error)"), closesConnection: true)
        }
        let key = path.segments.joined(separator: "/")
        guard let file = files[key.isEmpty ? "index.html" : key] ?? files[key + "/index.html"] else {
            return Reply(.error(.notFound, "no such file"))
        }
        var headers = HTTPHeaders()
        headers.add("ETag", file.etag)
        headers.add("Cache-Control", "no-cache")
        // Lines of one list field are one list (RFC 9110 §5.3).
        let conditions = request.headers.values("If-None-Match")
        if !conditions.isEmpty, Self.matches(conditions.joined(separator: ", "), file.etag) {
            return Reply(HTTPResponse(status: .notModified, headers: headers))
        }
        headers.add("Content-Type", file.contentType)
        return Reply(HTTPResponse(status: .ok, headers: headers), sharedBody: file.body)
    }

    /// Weak comparison (RFC 9110 §13.1.2): `*`, or any listed tag equal to ours ignoring `W/`.
    static func matches(_ condition: String, _ etag: String) -> Bool {
        for candidate in condition.split(separator: ",") {
            var tag = candidate.trimmingCharacters(in: " \t")
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
            if tag == etag { return true }
        }
        return false
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func read(_ path: String, size: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, size - done) }
            if n <= 0 { break }
            done += n
        }
        return done == size ? bytes : nil
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        var s = self
        while let first = s.first, set.contains(first) { s = s.dropFirst() }
        while let last = s.last, set.contains(last) { s = s.dropLast() }
        return String(s)
    }
}
