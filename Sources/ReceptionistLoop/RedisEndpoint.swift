/// Where a Redis server is: `redis://[[user]:password@]host[:port][/db]`.
///
/// Pure value; any thread.
public struct RedisEndpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var database: Int
    public var user: String?
    public var password: String?

    public init(host: String = "127.0.0.1", port: Int = 6379, database: Int = 0, user: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.database = database
        self.user = user
        self.password = password
    }

    /// Parses a `redis://` URL; nil when it is not one. A missing host is 127.0.0.1, a missing port
    /// 6379, a missing database 0. IPv6 hosts are written in brackets.
    public init?(url: String) {
        let scheme = "redis://"
        guard url.hasPrefix(scheme) else { return nil }
        var rest = Substring(url.dropFirst(scheme.count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !path.isEmpty {
                guard let number = Int(path), number >= 0 else { return nil }
                database = number
            }
        }
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                let name = credentials[..<colon]
                user = name.isEmpty ? nil : String(name)
                password = String(credentials[credentials.index(after: colon)...])
            } else {
                password = String(credentials)
            }
        }
        var host = "127.0.0.1"
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            if colon != rest.startIndex { host = String(rest[..<colon]) }
            portText = rest[rest.index(after: colon)...]
        } else if !rest.isEmpty {
            host = String(rest)
        }
        var port = 6379
        if let portText {
            guard let number = Int(portText), (1...65_535).contains(number) else { return nil }
            port = number
        }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port, database: database, user: user, password: password)
    }

    /// The URL without its password, for logs.
    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "redis://\(host):\(port)/\(database)"
    }
}
