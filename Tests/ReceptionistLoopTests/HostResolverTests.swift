import Dispatch
@testable import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

/// `HostResolver`: a name is looked up off the loop and answered on it; an address is answered
/// at once; a lookup that fails is an error, not a hang. A real loop and the system's resolver
/// (`localhost` from /etc/hosts; an empty name fails without asking a name server).
@Suite struct HostResolverTests {
    private func answers(_ hosts: [String]) -> [String] {
        let answers = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let loopThread = LoopThread { loop in
            var left = hosts.count
            for host in hosts {
                HostResolver.resolve(host, on: loop) { answer in
                    precondition(loop.isCurrent, "answered off the loop")
                    let text = switch answer {
                    case .success(let address): "\(host) \(address)"
                    case .failure: "\(host) failed"
                    }
                    answers.withLock { $0.append(text) }
                    left -= 1
                    if left == 0 {
                        loop.mailbox.shutDown()
                        done.signal()
                    }
                }
            }
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(loopThread.waitUntilStopped(seconds: 5))
        return answers.withLock { $0 }
    }

    @Test func anAddressIsAnsweredAtOnceAndANameOnTheLoop() {
        let got = answers(["10.1.2.3", "::1", "localhost", ""])
        // Addresses first, at once, in the order asked; the lookups after, in either order.
        #expect(Array(got.prefix(2)) == ["10.1.2.3 10.1.2.3", "::1 ::1"])
        let looked = Set(got.dropFirst(2))
        #expect(looked.contains(" failed"))
        // IPv4 first, as hiredis's own lookup chose (/etc/hosts gives localhost both).
        #expect(looked.contains("localhost 127.0.0.1"), "\(looked)")
    }

    @Test func addressesAreToldFromNames() {
        #expect(HostResolver.isAddress("127.0.0.1") && HostResolver.isAddress("::1") && HostResolver.isAddress("fe80::1"))
        #expect(!HostResolver.isAddress("redis") && !HostResolver.isAddress("localhost") && !HostResolver.isAddress("1.2.3"))
    }
}
