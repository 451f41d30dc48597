/// An HTTP/1.1 response head read as bytes, for the bench's clients: where it ends, its lines,
/// and a field's value. Nothing becomes a string but the values asked for: a run's clients read
/// every response (an upgrade per subscriber, an answer per publish) on one core.
enum ResponseHead {
    /// Where the head that starts at `start` ends (its closing CRLF CRLF begins there), if it is
    /// all here.
    static func end(in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count - start >= 4 else { return nil }
        for i in start...(bytes.count - 4)
        where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }

    /// The length of the complete response that starts at `start`, and whether its status is 2xx,
    /// if it is all here; its body is its Content-Length long (none without one, or with one that
    /// is not a number). Read in place: a publisher reads one of these for every message. It walks
    /// the lines itself: sharing `lines`' walk through a closure cost callgrind a quarter more
    /// instructions a request.
    static func response(in bytes: [UInt8], from start: Int) -> (length: Int, success: Bool)? {
        guard let end = end(in: bytes, from: start) else { return nil }
        var bodyLength = 0
        var lineStart = start
        while lineStart < end {
            var lineEnd = lineStart
            while lineEnd < end && !(bytes[lineEnd] == 13 && bytes[lineEnd + 1] == 10) { lineEnd += 1 }
            if lineStart != start && line(lineStart..<lineEnd, of: bytes, startsWith: "content-length:") {
                bodyLength = number(in: bytes, (lineStart + 15)..<lineEnd) ?? 0
            }
            lineStart = lineEnd + 2
        }
        let total = end + 4 - start + bodyLength
        guard bytes.count - start >= total else { return nil }
        return (total, line(start..<end, of: bytes, startsWith: "http/1.1 2"))
    }

    /// The decimal number `range` holds between spaces, if that is all it holds.
    private static func number(in bytes: [UInt8], _ range: Range<Int>) -> Int? {
        var value = 0
        var digits = 0
        var trailing = false
        for index in range {
            let byte = bytes[index]
            if byte == 32 {
                if digits > 0 { trailing = true }
            } else if byte >= 48 && byte <= 57 && !trailing && digits < 18 {
                value = value * 10 + Int(byte - 48)
                digits += 1
            } else {
                return nil
            }
        }
        return digits > 0 ? value : nil
    }

    /// The lines of the head from `start` to `end`, split at CRLF; the first is the status line.
    static func lines(in bytes: [UInt8], from start: Int, to end: Int) -> [Range<Int>] {
        var lines: [Range<Int>] = []
        var lineStart = start
        var index = start
        while index + 1 < end {
            if bytes[index] == 13 && bytes[index + 1] == 10 {
                lines.append(lineStart..<index)
                lineStart = index + 2
                index += 2
            } else {
                index += 1
            }
        }
        lines.append(lineStart..<end)
        return lines
    }

    /// Whether `line` starts with `prefix`, given in lower case, in any case.
    static func line(_ line: Range<Int>, of bytes: [UInt8], startsWith prefix: String) -> Bool {
        guard line.count >= prefix.utf8.count else { return false }
        for (offset, byte) in prefix.utf8.enumerated() {
            let found = bytes[line.lowerBound + offset]
            // ASCII lower case: a capital differs from its lower case only in the 0x20 bit.
            if found != byte && !(found >= 65 && found <= 90 && found | 0x20 == byte) { return false }
        }
        return true
    }

    /// The value, spaces trimmed, of the first of `lines` that starts with `name` (lower case,
    /// colon included) in any case.
    static func value(of name: String, in bytes: [UInt8], lines: ArraySlice<Range<Int>>) -> String? {
        guard let line = lines.first(where: { Self.line($0, of: bytes, startsWith: name) }) else { return nil }
        var value = (line.lowerBound + name.utf8.count)..<line.upperBound
        while let first = value.first, bytes[first] == 32 { value = (first + 1)..<value.upperBound }
        while let last = value.last, bytes[last] == 32 { value = value.lowerBound..<last }
        return String(decoding: bytes[value], as: UTF8.self)
    }
}
