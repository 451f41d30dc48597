import Logging
import ReceptionistLoop
import ReceptionistWire

/// Every open connection's current session, the connection limits, and the periodic sweep.
///
/// A connection over `--max-connections` or `--max-connections-per-address` gets its refusal
/// and is closed; it is tracked until then but not counted. A connection that lingers (shut
/// down for writing, read out) longer than `--linger` is closed here, whatever it speaks.
///
/// Loop thread only.
final class ConnectionTable: SessionTable {
    private let config: GatewayConfig
    private let counters: GatewayCounters
    private let logger: Logger
    /// Every connection's current session, each at the slot its connection records
    /// (`TCPConnection.ownerSlot`): no dictionary keyed by the connection, whose storage an idle
    /// connection would pay for. A session that upgrades to WebSocket or SSE replaces itself in
    /// the same slot; a closed one's slot is filled by the last session.
    private var sessions: ContiguousArray<any GatewaySession> = []
    /// Sessions that count against `maxConnections` (refused ones do not).
    private var servingCount = 0
    /// Serving connections per client address, for `maxConnectionsPerAddress`.
    private var perAddress: [String: Int] = [:]
    private var refused: Set<ObjectIdentifier> = []
    /// Connections over `--max-connections` still read, for the operations endpoints alone, at
    /// most `operationsHeadroom` at once: a full gateway still answers its probes and scrapes.
    private var operationsOnly: [ObjectIdentifier: String] = [:]
    /// Of those, per client address: one client holding them all would leave probes none.
    private var operationsOnlyPerAddress: [String: Int] = [:]
    static let operationsHeadroom = 16
    static let operationsHeadroomPerAddress = 4
    /// Called when the last connection closes (the drain waits for it).
    var onEmpty: (() -> Void)?

    init(config: GatewayConfig, counters: GatewayCounters, logger: Logger) {
        self.config = config
        self.counters = counters
        self.logger = logger
    }

    var isEmpty: Bool { sessions.isEmpty }
    var count: Int { sessions.count }
    var all: [any GatewaySession] { Array(sessions) }

    /// The connection's current session, or nil once it has closed.
    func session(of connection: TCPConnection) -> (any GatewaySession)? {
        slot(of: connection).map { sessions[$0] }
    }

    private func slot(of connection: TCPConnection) -> Int? {
        let slot = Int(connection.ownerSlot)
        guard slot >= 0, slot < sessions.count, sessions[slot].connection === connection else { return nil }
        return slot
    }

    /// Open connections by the protocol they speak, for `/metrics`.
    func countByTransport() -> [SessionTransport: Int] {
        var counts: [SessionTransport: Int] = [:]
        for session in sessions { counts[session.transport, default: 0] += 1 }
        return counts
    }

    /// A new connection's session: started, or refused over a limit.
    func accept(_ session: HTTPSession) {
        let connection = session.connection
        let id = ObjectIdentifier(connection)
        connection.ownerSlot = Int32(sessions.count)
        sessions.append(session)
        let address = connection.peerAddress ?? "unknown"
        if servingCount >= config.maxConnections {
            let fromAddress = operationsOnlyPerAddress[address, default: 0]
            guard operationsOnly.count < Self.operationsHeadroom, fromAddress < Self.operationsHeadroomPerAddress else {
                return refuse(session, id, .connectionLimit, .overCapacity, "too many connections")
            }
            operationsOnly[id] = address
            operationsOnlyPerAddress[address] = fromAddress + 1
            return session.startOperationsOnly()
        }
        let fromAddress = perAddress[address, default: 0]
        if fromAddress >= config.maxConnectionsPerAddress {
            return refuse(session, id, .addressLimit, .tooManyRequests, "too many connections from this address")
        }
        perAddress[address] = fromAddress + 1
        servingCount += 1
        session.start()
    }

    private func refuse(_ session: HTTPSession, _ id: ObjectIdentifier, _ reason: Refusal, _ status: HTTPStatus, _ detail: String) {
        refused.insert(id)
        counters.refused(reason)
        session.refuse(status, detail)
        logger.debug("connection refused", metadata: ["reason": "\(reason.rawValue)"])
    }

    func replaceSession(of connection: TCPConnection, with session: any GatewaySession) {
        guard let slot = slot(of: connection) else { return }
        sessions[slot] = session
    }

    func sessionDidClose(_ connection: TCPConnection) {
        guard let slot = slot(of: connection) else { return }
        let last = sessions.removeLast()
        if slot < sessions.count {
            sessions[slot] = last
            last.connection.ownerSlot = Int32(slot)
        }
        connection.ownerSlot = -1
        let id = ObjectIdentifier(connection)
        if let address = operationsOnly.removeValue(forKey: id) {
            let remaining = operationsOnlyPerAddress[address, default: 1] - 1
            operationsOnlyPerAddress[address] = remaining > 0 ? remaining : nil
        } else if refused.remove(id) == nil {
            servingCount -= 1
            let address = connection.peerAddress ?? "unknown"
            let remaining = perAddress[address, default: 1] - 1
            perAddress[address] = remaining > 0 ? remaining : nil
        }
        if sessions.isEmpty { onEmpty?() }
    }

    /// Asks every open session for its deadlines, and closes connections that linger too long.
    func sweep(now: UInt64) {
        let linger = UInt64(config.lingerSeconds * 1000)
        for session in sessions {
            let connection = session.connection
            switch connection.state {
            case .open:
                session.sweep(now: now)
            case .lingering:
                if let lingered = connection.lingeredMilliseconds(now: now), lingered >= linger { connection.close() }
            case .closing, .closed:
                break
            }
        }
    }

    /// Closes every connection now (a second signal, or the drain timeout).
    func closeAll() {
        for session in sessions { session.connection.close() }
    }

    /// The sweep's period: a tenth of the shortest timeout, between 10 ms and 1 s.
    static func sweepInterval(_ config: GatewayConfig) -> UInt64 {
        let shortest = min(
            config.idleTimeoutSeconds, config.headTimeoutSeconds, config.lingerSeconds,
            config.pingIntervalSeconds, config.pingTimeoutSeconds, config.sseHeartbeatSeconds)
        return UInt64(max(10, min(1000, shortest * 1000 / 10)))
    }
}
