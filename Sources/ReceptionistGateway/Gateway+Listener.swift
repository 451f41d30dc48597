import Logging
import ReceptionistLoop

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
}
