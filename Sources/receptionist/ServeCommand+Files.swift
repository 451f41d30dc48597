import ArgumentParser
import Glibc

/// The files `receptionist serve` reads or makes: secrets files and the data directory.
extension ServeCommand {
    /// Creates the data directory (and its parents) if it is not there yet.
    static func makeDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw ValidationError("cannot create the data directory \(prefix): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// The non-empty lines of a secrets file that are not comments, trimmed of spaces, tabs and
    /// carriage returns. Worked on as bytes: Swift counts "\r\n" as one character.
    static func keys(inFile path: String) throws -> [String] {
        guard let file = fopen(path, "r") else { throw ValidationError("cannot read \(path)") }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        // A directory, say, opens and then fails to read: not an empty file.
        guard ferror(file) == 0 else { throw ValidationError("cannot read \(path): \(String(cString: strerror(errno)))") }
        let blank: Set<UInt8> = [UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r")]
        return bytes.split(separator: UInt8(ascii: "\n")).compactMap { line in
            var trimmed = line[...]
            while let first = trimmed.first, blank.contains(first) { trimmed = trimmed.dropFirst() }
            while let last = trimmed.last, blank.contains(last) { trimmed = trimmed.dropLast() }
            guard !trimmed.isEmpty, trimmed.first != UInt8(ascii: "#") else { return nil }
            return String(decoding: trimmed, as: UTF8.self)
        }
    }
}
