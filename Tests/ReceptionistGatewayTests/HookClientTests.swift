import Glibc
import Logging
@testable import ReceptionistGateway
import ReceptionistJSON
import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

/// `HookClient` on a real loop, calling a backend that takes the connection and never answers (a
/// listening socket nobody accepts from: the kernel completes the handshake).
@Suite struct HookClientTests {
    /// One call in flight hangs until its time-out; a hundred thousand wait behind it and run out
    /// meanwhile. When the slot frees, each is answered `unavailable` in turn. Before, each
    /// expired call answered the next one from inside its own answer, one stack frame pair per
    /// call, and a long queue overflowed the loop thread's stack (the gateway died of SIGSEGV).
    @Test(.timeLimit(.minutes(1))) func aLongQueueThatRanOutIsAnsweredWithoutNesting() throws {
        let listener = try Listener()
        let port = listener.port
        let waiting = 100_000
        let answers = Mutex<(unavailable: Int, other: Int)>((0, 0))
        let thread = LoopThread { loop in
            var settings = HookSettings()
            settings.urls[.rpc] = "http://127.0.0.1:\(port)/rpc"
            settings.timeoutSeconds = 0.3
            settings.maxInFlight = 1
            settings.maxQueued = waiting
            let hooks = HookClient(settings: settings, loop: loop, logger: Logger(label: "test"))
            let total = waiting + 1
            for _ in 0..<total {
                hooks.call(.rpc, ["method": "hang"]) { answer in
                    let done = answers.withLock { answers in
                        if case .unavailable = answer { answers.unavailable += 1 } else { answers.other += 1 }
                        return answers.unavailable + answers.other == total
                    }
                    if done {
                        hooks.close()
                        loop.mailbox.shutDown()
                    }
                }
            }
            // RPCs leave a quarter of the queue to calls that admit clients; the rest are refused.
            #expect(hooks.queued == waiting - waiting / 4)
        }
        #expect(thread.waitUntilStopped(seconds: 30))
        #expect(answers.withLock { $0 } == (waiting + 1, 0))
        withExtendedLifetime(listener) {}
    }

    /// A TCP socket listening on loopback that never accepts.
    private final class Listener {
        let fd: Int32
        let port: Int

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    bind(fd, address, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, address, &length) == 0
                }
            }
            self.fd = fd
            port = Int(UInt16(bigEndian: address.sin_port))
            try #require(bound)
        }

        deinit { close(fd) }
    }
}
