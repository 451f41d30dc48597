import CLibUV

/// Socket address conversions between text and `sockaddr`.
enum SocketAddress {
    static func text(of storage: inout sockaddr_storage) -> String? {
        var name = [CChar](repeating: 0, count: 64)
        let capacity = name.count
        let family = Int32(storage.ss_family)
        let status: Int32 = withUnsafePointer(to: &storage) { pointer in
            name.withUnsafeMutableBufferPointer { out in
                if family == AF_INET6 {
                    return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        uv_ip6_name($0, out.baseAddress, capacity)
                    }
                }
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    uv_ip4_name($0, out.baseAddress, capacity)
                }
            }
        }
        guard status == 0 else { return nil }
        let length = name.firstIndex(of: 0) ?? name.count
        return String(decoding: name[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func port(of storage: inout sockaddr_storage) -> Int {
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    /// Parses `host` (IPv4 or IPv6 literal) and `port` into a `sockaddr_storage`.
    static func make(host: String, port: Int) throws(LoopError) -> sockaddr_storage {
        var storage = sockaddr_storage()
        let status: Int32 = withUnsafeMutablePointer(to: &storage) { pointer in
            if host.contains(":") {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_addr(host, Int32(port), $0) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(host, Int32(port), $0) }
        }
        try LoopError.check(status, "parse address \(host):\(port)")
        return storage
    }
}
