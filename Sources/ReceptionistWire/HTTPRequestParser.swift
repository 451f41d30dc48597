import CHTTPParser

/// An incremental HTTP/1.x request decoder over http-parser.
///
/// This is the only file in the project that imports `CHTTPParser`, so the C parser can be
/// swapped without touching anything else. The decoder is a pure codec: bytes go in, complete
/// requests (or one error) come out. It owns no socket, clock or thread. It is a class only
/// because http-parser needs a stable address to call back into.
///
/// Thread affinity: one instance is used by one thread at a time.
public final class HTTPRequestParser {
    /// Where the decoder is inside the current message; the session turns this into timeouts.
    public enum Phase: Sendable, Equatable {
        case idle, head, body
    }

    public struct Output: Sendable {
        public var requests: [HTTPRequest] = []
        /// Set once; after an error the stream cannot be trusted and the decoder accepts nothing more.
        public var error: HTTPParseError?
        /// After an upgrade request, the bytes that followed its head belong to the new protocol.
        public var upgradeRemainder: [UInt8]?
    }

    public let limits: HTTPParserLimits
    public private(set) var phase: Phase = .idle
    /// The request being read asked for `100 Continue` before it sends its body (`Expect:
    /// 100-continue`), and its body has not all come; `continueSent` once it is answered.
    public private(set) var awaitsContinue = false
    /// The request whose head is being read (or was refused) is a `HEAD`: an error refusing it
    /// has no body.
    public private(set) var headRequest = false
    private var failure: HTTPParseError?
    private var upgraded = false

    private let parser: UnsafeMutablePointer<http_parser>
    private let settings: UnsafeMutablePointer<http_parser_settings>

    // The message being assembled. The target and each field's name and value stay in the
    // buffer being parsed until they are made strings, unless a read ends inside one
    // (`HTTPHeadPiece`): copying every piece first cost a publish more than its strings did.
    private var url = HTTPHeadPiece()
    private var fieldName = HTTPHeadPiece()
    private var fieldValue = HTTPHeadPiece()
    private var lastWasValue = false
    private var headers = HTTPHeaders()
    private var body: [UInt8] = []
    private var scanner: HTTPHeadScanner
    private var scanningHead = true
    private var pendingError: HTTPParseError?
    private var finished: [HTTPRequest] = []
    /// A chunked body's framing, checked strictly beside http-parser (which is lenient), from
    /// the end of its head to the end of its message.
    private var chunked: ChunkedFraming?
    /// Bytes of empty lines read ahead of the next request line.
    private var leadingBlankBytes = 0
    private var head: (method: HTTPMethod, major: Int, minor: Int, keepAlive: Bool, upgrade: Bool)?

    public init(limits: HTTPParserLimits = HTTPParserLimits()) {
        self.limits = limits
        scanner = HTTPHeadScanner(maxBytes: limits.maxHeadBytes)
        parser = .allocate(capacity: 1)
        http_parser_init(parser, HTTP_REQUEST)
        settings = .allocate(capacity: 1)
        http_parser_settings_init(settings)
        settings.pointee.on_message_begin = { p in HTTPRequestParser.from(p).messageBegan() }
        settings.pointee.on_url = { p, at, length in HTTPRequestParser.from(p).urlBytes(at, length) }
        settings.pointee.on_header_field = { p, at, length in HTTPRequestParser.from(p).fieldBytes(at, length) }
        settings.pointee.on_header_value = { p, at, length in HTTPRequestParser.from(p).valueBytes(at, length) }
        settings.pointee.on_headers_complete = { p in HTTPRequestParser.from(p).headComplete() }
        settings.pointee.on_body = { p, at, length in HTTPRequestParser.from(p).bodyBytes(at, length) }
        settings.pointee.on_message_complete = { p in HTTPRequestParser.from(p).messageComplete() }
    }

    deinit {
        parser.deallocate()
        settings.deallocate()
    }

    /// Feeds the next bytes of the stream. Any split of the stream yields the same requests.
    public func parse(_ bytes: UnsafeRawBufferPointer) -> Output {
        var output = Output()
        if let failure {
            output.error = failure
            return output
        }
        guard !upgraded, bytes.count > 0 else { return output }
        parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        defer { parser.pointee.data = nil }
        // Whatever is still held in the caller's buffer is copied before it goes.
        defer {
            url.copyHeld()
            fieldName.copyHeld()
            fieldValue.copyHeld()
        }
        let base = bytes.baseAddress!.assumingMemoryBound(to: CChar.self)
        var offset = 0
        var headEnd = 0
        while offset < bytes.count {
            // Where the bytes of a body read by the next call start: after a head it completes.
            var bodyStart = offset
            if scanningHead {
                switch scanner.scan(bytes, from: offset) {
                case .needMore:
                    break
                case .complete(let end):
                    headEnd = end
                    bodyStart = end
                    scanningHead = false
                case .invalid(let reason, let index):
                    let error = HTTPParseError(status: .badRequest, detail: reason)
                    return refuse(error, at: index, of: base, from: offset, into: &output)
                case .tooLarge(let index):
                    let error = HTTPParseError(
                        status: .headerFieldsTooLarge, detail: "request head exceeds \(limits.maxHeadBytes) bytes")
                    return refuse(error, at: index, of: base, from: offset, into: &output)
                }
            }
            // The message-complete callback pauses the parser, so each call ends at a message boundary.
            let start = offset
            offset += http_parser_execute(parser, settings, base + offset, bytes.count - offset)
            let errno = chp_errno(parser)
            let complete = errno == HPE_PAUSED.rawValue
            // The strict framing sees every body byte http-parser took, up to a refusal of its own
            // too: the earlier byte's refusal is answered, however the stream was split.
            if chunked != nil, offset > bodyStart,
                !checkChunked(UnsafeRawBufferPointer(rebasing: bytes[max(start, bodyStart)..<offset]), complete: complete)
            {
                finished.removeAll()
                return fail(chunked?.tooLarge == true ? bodyTooLarge : Self.badChunkedFraming, into: &output)
            }
            output.requests += finished
            finished.removeAll(keepingCapacity: true)
            if phase == .idle, !complete, offset > start {
                // Empty lines ahead of a request line: one is ignored (RFC 9112, section 2.2); more
                // are the start of a head, and its time-out runs.
                leadingBlankBytes += offset - start
                if leadingBlankBytes > 2 { phase = .head }
            }
            if complete {
                // The message's framing was checked whole; what follows is the next message's.
                chunked = nil
                http_parser_pause(parser, 0)
                scanner.reset()
                scanningHead = true
                if chp_upgrade(parser) != 0 {
                    // What follows the head belongs to the new protocol. The scanner knows exactly
                    // where the head ended; http-parser may stop one byte short of it.
                    upgraded = true
                    output.upgradeRemainder = Array(UnsafeRawBufferPointer(rebasing: bytes[max(headEnd, offset)...]))
                    return output
                }
                continue
            }
            if errno != HPE_OK.rawValue {
                return fail(pendingError ?? Self.error(forParserErrno: errno), into: &output)
            }
            break
        }
        return output
    }

    /// The scanner refused the byte at `index`. http-parser has not seen the bytes from `offset` up
    /// to it, and may refuse one of them first (an unknown method, say, before the scanner reaches
    /// a bad byte later on the line). The earlier refusal is the one answered: had the stream been
    /// split just after that byte, http-parser would have seen it in an earlier call and answered
    /// it, and the answer must not depend on how the stream was split into reads.
    private func refuse(
        _ error: HTTPParseError, at index: Int, of base: UnsafePointer<CChar>, from offset: Int, into output: inout Output
    ) -> Output {
        if index > offset {
            // These bytes all lie inside one head, so the parser cannot complete a message in them.
            _ = http_parser_execute(parser, settings, base + offset, index - offset)
            let errno = chp_errno(parser)
            if errno != HPE_OK.rawValue {
                return fail(pendingError ?? Self.error(forParserErrno: errno), into: &output)
            }
        }
        return fail(error, into: &output)
    }

    private func fail(_ error: HTTPParseError, into output: inout Output) -> Output {
        failure = error
        output.error = error
        return output
    }

    /// Convenience for tests and callers holding an array.
    public func parse(_ bytes: [UInt8]) -> Output {
        bytes.withUnsafeBytes { parse($0) }
    }

    // MARK: - Callbacks (return non-zero to stop the C parser)

    private static func from(_ p: UnsafeMutablePointer<http_parser>?) -> HTTPRequestParser {
        Unmanaged<HTTPRequestParser>.fromOpaque(p!.pointee.data!).takeUnretainedValue()
    }

    private func messageBegan() -> Int32 {
        phase = .head
        leadingBlankBytes = 0
        url.clear()
        fieldName.clear()
        fieldValue.clear()
        lastWasValue = false
        // Room for a typical request's fields: grown one by one, the array is made three times.
        headers = HTTPHeaders(capacity: 8)
        body = []
        head = nil
        chunked = nil
        return 0
    }

    private func urlBytes(_ at: UnsafePointer<CChar>?, _ length: Int) -> Int32 {
        // The method is known once its target starts: a HEAD refused from here on gets no body.
        if url.isEmpty { headRequest = chp_method(parser) == HTTP_HEAD.rawValue }
        url.add(UnsafeRawBufferPointer(start: at, count: length))
        return 0
    }

    private func fieldBytes(_ at: UnsafePointer<CChar>?, _ length: Int) -> Int32 {
        // A chunked body's trailer fields come through the same callbacks after the head. They
        // are dropped: merged into the head's fields they would slip past the checks made on the
        // head (a second Content-Length, say), and nothing here reads trailers.
        guard phase == .head else { return 0 }
        if lastWasValue {
            commitField()
        }
        fieldName.add(UnsafeRawBufferPointer(start: at, count: length))
        return 0
    }

    private func valueBytes(_ at: UnsafePointer<CChar>?, _ length: Int) -> Int32 {
        guard phase == .head else { return 0 }
        lastWasValue = true
        fieldValue.add(UnsafeRawBufferPointer(start: at, count: length))
        return 0
    }

    private func commitField() {
        headers.add(fieldName.string, fieldValue.fieldValue, known: fieldName.knownHeader)
        fieldName.clear()
        fieldValue.clear()
        lastWasValue = false
    }

    private func headComplete() -> Int32 {
        if lastWasValue || !fieldName.isEmpty {
            commitField()
        }
        headRequest = chp_method(parser) == HTTP_HEAD.rawValue
        let major = Int(parser.pointee.http_major)
        let minor = Int(parser.pointee.http_minor)
        guard major == 1 else {
            pendingError = HTTPParseError(
                status: .versionNotSupported, detail: "HTTP/\(major).\(minor) is not supported; use HTTP/1.1")
            return -1
        }
        // The fields every request is checked for, found as they were added: a pass over the
        // fields only for those that came, and rarely (several `Connection` options, codings).
        let host = headers[.host]
        let hostCount = host == nil ? 0 : headers.isRepeated(.host) ? 2 : 1
        let lengthCount = headers[.contentLength] == nil ? 0 : headers.isRepeated(.contentLength) ? 2 : 1
        let codings = headers[.transferEncoding] == nil ? [] : headers.values("Transfer-Encoding")
        let expectsContinue = headers[.expect] != nil && headers.values("Expect").last?.asciiCaseInsensitiveEquals("100-continue") == true
        let closeAsked = headers[.connection] != nil && headers.values("Connection").contains(where: Self.namesClose)
        if let problem = Self.framingProblem(lengthCount: lengthCount, codings: codings, minor: minor) {
            pendingError = problem
            return -1
        }
        if let problem = HTTPHost.problem(count: hostCount, first: host, required: minor >= 1) {
            pendingError = HTTPParseError(status: .badRequest, detail: problem)
            return -1
        }
        // A target in absolute form names the host in place of the Host field (RFC 9112, section
        // 3.2.2), and is held to the same rules. Most targets are paths: one byte looked at.
        if url.first != UInt8(ascii: "/"), let authority = HTTPRequest.absoluteAuthority(url.string) {
            guard HTTPHost.isValid(authority) else {
                pendingError = HTTPParseError(
                    status: .badRequest, detail: "the request target's authority is not a host and an optional port")
                return -1
            }
            headers.set("Host", authority)
        }
        if parser.pointee.content_length != UInt64.max, parser.pointee.content_length > UInt64(limits.maxBodyBytes) {
            pendingError = bodyTooLarge
            return -1
        }
        phase = .body
        if !codings.isEmpty { chunked = ChunkedFraming(maxBodyBytes: UInt64(limits.maxBodyBytes)) }
        // An HTTP/1.0 client's expectation is ignored (RFC 9110, section 10.1.1).
        let length = parser.pointee.content_length
        awaitsContinue = expectsContinue && minor >= 1 && (!codings.isEmpty || (length != UInt64.max && length > 0))
        // http-parser keeps an HTTP/1.0 connection that names both keep-alive and close; a
        // close anywhere closes it (RFC 9112, section 9.6).
        head = (
            Self.method(chp_method(parser)), major, minor,
            http_should_keep_alive(parser) != 0 && !closeAsked, chp_upgrade(parser) != 0
        )
        return 0
    }

    private func bodyBytes(_ at: UnsafePointer<CChar>?, _ length: Int) -> Int32 {
        if body.count + length > limits.maxBodyBytes {
            pendingError = bodyTooLarge
            return 1
        }
        body.append(contentsOf: UnsafeRawBufferPointer(start: at, count: length))
        return 0
    }

    /// Checks the body bytes http-parser took in one call against the strict framing; at the
    /// message's end (`complete`), that the framing ends there too.
    private func checkChunked(_ bytes: UnsafeRawBufferPointer, complete: Bool) -> Bool {
        guard chunked!.take(bytes) else { return false }
        return !complete || chunked!.isDone
    }

    private static let badChunkedFraming = HTTPParseError(status: .badRequest, detail: "malformed chunked body")

    private var bodyTooLarge: HTTPParseError {
        HTTPParseError(status: .payloadTooLarge, detail: "request body exceeds \(limits.maxBodyBytes) bytes")
    }

    /// The `100 Continue` the request being read asked for was sent.
    public func continueSent() {
        awaitsContinue = false
    }

    private func messageComplete() -> Int32 {
        guard let head else { return 1 }
        finished.append(
            HTTPRequest(
                method: head.method, target: url.first == UInt8(ascii: "/") ? url.string : HTTPRequest.originForm(url.string),
                versionMajor: head.major, versionMinor: head.minor, headers: headers, body: body,
                keepAlive: head.keepAlive, isUpgrade: head.upgrade))
        self.head = nil
        body = []
        phase = .idle
        awaitsContinue = false
        headRequest = false
        // Stop here so `parse` learns exactly where the next message starts.
        http_parser_pause(parser, 1)
        return 0
    }

    // MARK: - Mapping

    private static func method(_ raw: UInt32) -> HTTPMethod {
        switch raw {
        case HTTP_GET.rawValue: .get
        case HTTP_HEAD.rawValue: .head
        case HTTP_POST.rawValue: .post
        case HTTP_PUT.rawValue: .put
        case HTTP_PATCH.rawValue: .patch
        case HTTP_DELETE.rawValue: .delete
        case HTTP_OPTIONS.rawValue: .options
        default: .other(String(cString: http_method_str(http_method(rawValue: raw))))
        }
    }

    private static func error(forParserErrno errno: UInt32) -> HTTPParseError {
        let description = String(cString: http_errno_description(http_errno(rawValue: errno)))
        switch errno {
        case HPE_HEADER_OVERFLOW.rawValue:
            return HTTPParseError(status: .headerFieldsTooLarge, detail: description)
        case HPE_INVALID_METHOD.rawValue:
            // http-parser refuses a method at its first byte that no known method continues with,
            // before the request line is whole, so it cannot tell an unknown method ("BREW /") from
            // a malformed line ("HELLO"): both are bad input, answered 400 however they are split
            // (a 501 would read as the gateway's failure to clients and API checkers alike).
            return HTTPParseError(status: .badRequest, detail: "unknown or malformed method")
        case HPE_INVALID_VERSION.rawValue:
            return HTTPParseError(status: .badRequest, detail: description)
        case HPE_INVALID_TRANSFER_ENCODING.rawValue:
            return HTTPParseError(status: .notImplemented, detail: description)
        default:
            return HTTPParseError(status: .badRequest, detail: description)
        }
    }
}
