import FuzzSupport
import ReceptionistWire

/// Fuzzes `HTTPRequestParser` (and the strict head scanner in front of it).
///
/// Input: a byte choosing how the stream is split, a byte choosing the limits, then the stream.
/// The stream is parsed whole and in pieces by two parsers; both must agree on everything, and
/// what comes out must obey the rules the scanner and the framing checks promise.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let splitSeed = input.takeByte()
    let limitChoice = Int(input.takeByte())
    let limits = HTTPParserLimits(
        maxHeadBytes: [48, 256, 1024, 16 * 1024][limitChoice & 3],
        maxBodyBytes: [0, 7, 256, 1024 * 1024][(limitChoice >> 2) & 3])
    let stream = input.rest

    let whole = ParsedStream(limits: limits, pieces: [stream[...]])
    let split = ParsedStream(limits: limits, pieces: fuzzPieces(stream, seed: splitSeed))
    fuzzCheck(whole == split, "whole and split parses differ:\n\(whole)\n\(split)")
    whole.checkRequests(stream: stream, limits: limits)
    return 0
}

/// Everything one parser produced over a stream fed in pieces.
struct ParsedStream: Equatable, CustomStringConvertible {
    var requests: [HTTPRequest] = []
    var error: HTTPParseError?
    /// After an upgrade, the rest of the stream: the remainder the parser handed back plus every
    /// later piece, which the caller passes to the new protocol.
    var upgradeRemainder: [UInt8]?
    var phase: HTTPRequestParser.Phase

    init(limits: HTTPParserLimits, pieces: [ArraySlice<UInt8>]) {
        let parser = HTTPRequestParser(limits: limits)
        for piece in pieces {
            if upgradeRemainder != nil {
                upgradeRemainder! += piece
                let output = parser.parse(Array(piece))
                fuzzCheck(output.requests.isEmpty && output.error == nil, "parser produced output after an upgrade")
                continue
            }
            let output = parser.parse(Array(piece))
            if let error {
                fuzzCheck(output.requests.isEmpty && output.error == error, "parser changed its mind after \(error)")
                continue
            }
            requests += output.requests
            error = output.error
            upgradeRemainder = output.upgradeRemainder
            if output.upgradeRemainder != nil {
                fuzzCheck(output.requests.last?.isUpgrade == true, "remainder without an upgrade request")
            }
        }
        phase = parser.phase
    }

    /// The phase only counts while the stream is good: after an error the connection closes, and
    /// the phase then tells how far http-parser got, which depends on the split.
    static func == (a: ParsedStream, b: ParsedStream) -> Bool {
        a.requests == b.requests && a.error == b.error && a.upgradeRemainder == b.upgradeRemainder
            && (a.error != nil || a.phase == b.phase)
    }

    var description: String {
        "\(requests.count) requests \(requests.map { "\($0.method) \($0.target) body \($0.body.count)" }), "
            + "error \(error.map { "\($0.status) \($0.detail)" } ?? "none"), "
            + "remainder \(upgradeRemainder.map { "\($0.count) bytes" } ?? "none"), phase \(phase)"
    }

    /// The rules every request that comes out must obey: what the head scanner lets through, and
    /// one unambiguous framing.
    func checkRequests(stream: [UInt8], limits: HTTPParserLimits) {
        if let rest = upgradeRemainder {
            fuzzCheck(rest.count <= stream.count && stream.suffix(rest.count).elementsEqual(rest),
                      "upgrade remainder is not the end of the stream")
        }
        for request in requests {
            fuzzCheck(request.versionMajor == 1, "HTTP/\(request.versionMajor) request accepted")
            fuzzCheck(!request.target.isEmpty && request.target.utf8.allSatisfy { (33...126).contains($0) },
                      "request target \(Array(request.target.utf8)) has bytes the scanner refuses")
            fuzzCheck(request.body.count <= limits.maxBodyBytes, "body over the limit")
            var lengths: [String] = []
            var chunked = false
            for field in request.headers {
                fuzzCheck(!field.name.isEmpty && field.name.utf8.allSatisfy(isTokenByte),
                          "header name \(Array(field.name.utf8)) is not a token")
                fuzzCheck(field.value.utf8.allSatisfy { $0 >= 32 && $0 != 127 || $0 == 9 },
                          "header value \(Array(field.value.utf8)) has a control character")
                if field.name.asciiCaseInsensitiveEquals("Content-Length") { lengths.append(field.value) }
                if field.name.asciiCaseInsensitiveEquals("Transfer-Encoding") { chunked = true }
            }
            fuzzCheck(lengths.count <= 1 && !(chunked && !lengths.isEmpty), "ambiguous framing accepted")
            if let length = lengths.first {
                let digits = length.utf8.drop { $0 == 32 || $0 == 9 }.reversed().drop { $0 == 32 || $0 == 9 }.reversed()
                fuzzCheck(!digits.isEmpty && digits.allSatisfy { (48...57).contains($0) }
                          && Int(String(decoding: digits, as: UTF8.self)) == request.body.count,
                          "Content-Length '\(length)' but a body of \(request.body.count) bytes")
            }
        }
    }
}

/// RFC 9110 tchar.
func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        true
    default:
        "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}

@main
enum FuzzHTTPRequestMain {
    static func main() {
        FuzzDriver.main(fuzzHTTPRequest)
    }
}
