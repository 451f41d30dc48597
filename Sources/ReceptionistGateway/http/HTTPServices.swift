import Logging
import ReceptionistLoop
import ReceptionistModel

/// What every HTTP session is handed when it starts: the router, the job threads and the door
/// back to the loop, the date header, and the stream services a connection upgrades into.
/// Sessions see these and nothing else of the gateway.
///
/// Loop thread only.
final class HTTPServices {
    let config: GatewayConfig
    let router: Router
    /// Runs a request's work on the job threads and brings its answer back to the loop.
    let handoff: JobHandoff
    let dateCache: DateCache
    let streams: StreamServices

    init(config: GatewayConfig, router: Router, jobs: JobRunner, mailbox: Mailbox, dateCache: DateCache, streams: StreamServices) {
        self.config = config
        self.router = router
        handoff = JobHandoff(jobs: jobs, mailbox: mailbox)
        self.dateCache = dateCache
        self.streams = streams
    }

    var logger: Logger { streams.logger }
    var counters: GatewayCounters { streams.counters }
    var table: any SessionTable { streams.table }
}
