import Glibc
import Logging
import ReceptionistLoop
import ReceptionistWire

/// What the gateway needs to listen: its static files, and how it reports a failed accept.
extension Gateway {
    static func staticFiles(_ config: GatewayConfig, _ logger: Logger) -> StaticFiles {
        let files = StaticFiles(directory: config.publicDirectory)
        if files.isEmpty {
            logger.warning("no static files loaded", metadata: ["public": "\(config.publicDirectory)"])
        }
        for file in files.skipped {
            logger.warning("static file not served", metadata: ["file": "\(file)", "public": "\(config.publicDirectory)"])
        }
        return files
    }

    func acceptFailed(_ error: LoopError) {
        // libuv sheds the pending connection itself; logging every failure would flood the log.
        acceptErrorsLogged += 1
        if acceptErrorsLogged <= 10 || acceptErrorsLogged % 1000 == 0 {
            logger.error("accept failed", metadata: ["error": "\(error)", "count": "\(acceptErrorsLogged)"])
        }
    }

    /// Connections shed for want of descriptors: counted as refused (`descriptors`), and logged,
    /// but not every time: a flood of them would flood the log.
    func shed(_ count: Int, counters: GatewayCounters) {
        for _ in 0..<count { counters.refused(.descriptors) }
        let before = shedLogged
        shedLogged += count
        // The first few sheds, then one in every thousand connections shed.
        if before < 10 || before / 1000 != shedLogged / 1000 {
            logger.warning(
                "out of file descriptors: connections refused with 503",
                metadata: ["refused": "\(shedLogged)", "max-connections": "\(config.maxConnections)"])
        }
    }

    /// What a connection shed for want of descriptors reads before it is closed: made once, so it
    /// has no `Date`.
    static let shedReply: [UInt8] = {
        var response = HTTPResponse.error(.overCapacity, "the gateway has no file descriptors left for the connection; retry later")
        response.headers.add("Retry-After", "1")
        var bytes = response.body.withUnsafeBytes {
            HTTPResponseEncoder.head(response, date: "", keepAlive: false, contentLength: response.body.count, inlineBody: $0)
        }
        if let date = bytes.firstRange(of: Array("Date: \r\n".utf8)) { bytes.removeSubrange(date) }
        return bytes
    }()

    /// Raises the soft limit on open files to the hard one, as far as the process may, and warns
    /// when `--max-connections` is beyond it: each connection holds a descriptor, and past the
    /// limit new ones are refused with 503 before they are read.
    static func raiseDescriptorLimit(for config: GatewayConfig, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        // Descriptors the gateway holds beside its connections: the loop, the listener and its
        // reserve, job threads, the data file, Redis and hook connections.
        let spare: rlim_t = 64
        if limit.rlim_cur != rlim_t.max, rlim_t(config.maxConnections) + spare > limit.rlim_cur {
            logger.warning(
                "--max-connections is beyond the open-file limit: past it, new connections are refused with 503",
                metadata: ["max-connections": "\(config.maxConnections)", "open-file limit": "\(limit.rlim_cur)"])
        }
    }
}
