import CLibUV
import Glibc

/// Looks a host name up on libuv's thread pool and answers on the loop, so a slow or failing
/// resolver never holds the loop (hiredis's own connect resolves synchronously: each attempt to
/// reach `redis://redis:6379` while DNS was down froze every client for the resolver's time-out).
/// An address literal is answered at once, without a lookup.
///
/// Loop thread only.
enum HostResolver {
    /// What a lookup in flight answers to; retained by the request until libuv calls back.
    private final class Pending {
        let done: (Result<String, LookupError>) -> Void
        init(_ done: @escaping (Result<String, LookupError>) -> Void) { self.done = done }
    }

    struct LookupError: Error, CustomStringConvertible {
        let description: String
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isAddress(_ host: String) -> Bool {
        var storage = in6_addr()
        return inet_pton(AF_INET, host, &storage) == 1 || inet_pton(AF_INET6, host, &storage) == 1
    }

    /// `done`, on the loop, gets an address `host` has (as text), or why it has none.
    static func resolve(_ host: String, on loop: EventLoop, _ done: @escaping (Result<String, LookupError>) -> Void) {
        precondition(loop.isCurrent)
        if isAddress(host) { return done(.success(host)) }
        let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
        request.initialize(to: uv_getaddrinfo_t())
        let pending = Unmanaged.passRetained(Pending(done))
        request.pointee.data = pending.toOpaque()
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        let status = uv_getaddrinfo(loop.raw, request, { request, status, result in
            guard let request else { return }
            let pending = Unmanaged<Pending>.fromOpaque(request.pointee.data).takeRetainedValue()
            request.deallocate()
            defer { if let result { uv_freeaddrinfo(result) } }
            guard status == 0, let result, let address = HostResolver.text(of: result) else {
                let reason = status == 0 ? "no address" : String(cString: uv_strerror(status))
                return pending.done(.failure(LookupError(description: "cannot resolve the host: \(reason)")))
            }
            pending.done(.success(address))
        }, host, nil, &hints)
        if status != 0 {
            pending.release()
            request.deallocate()
            done(.failure(LookupError(description: "cannot resolve the host: \(String(cString: uv_strerror(status)))")))
        }
    }

    /// The first IPv4 address of a lookup's answer, else its first IPv6 one, as text: as
    /// hiredis's own lookup chose.
    private static func text(of result: UnsafeMutablePointer<addrinfo>) -> String? {
        var chosen: UnsafeMutablePointer<sockaddr>?
        var next: UnsafeMutablePointer<addrinfo>? = result
        while let entry = next {
            if let address = entry.pointee.ai_addr {
                if Int32(address.pointee.sa_family) == AF_INET { chosen = address; break }
                if chosen == nil, Int32(address.pointee.sa_family) == AF_INET6 { chosen = address }
            }
            next = entry.pointee.ai_next
        }
        guard let address = chosen else { return nil }
        var name = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let status: Int32 = switch Int32(address.pointee.sa_family) {
        case AF_INET: address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_name($0, &name, name.count) }
        case AF_INET6: address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_name($0, &name, name.count) }
        default: -1
        }
        return status == 0 ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    }
}
