@testable import ReceptionistGateway
import Testing

@Suite struct HookQueueTests {
    @Test func callsPastTheInFlightBoundWaitInOrderThenPastTheQueueAreRefused() {
        var queue = HookQueue<Int>(maxInFlight: 2, maxQueued: 2)
        var started: [Int] = []
        var refused: [Int] = []
        for call in 1...5 {
            switch queue.submit(call) {
            case .start(let id): started.append(id)
            case .queued: break
            case .refused(let id): refused.append(id)
            }
        }
        #expect(started == [1, 2])
        #expect(refused == [5])
        #expect(queue.inFlight == 2 && queue.queued == 2)
        // Each end starts the longest waiting, in its place.
        #expect(queue.finished() == 3)
        #expect(queue.finished() == 4)
        #expect(queue.inFlight == 2 && queue.queued == 0)
        #expect(queue.finished() == nil)
        #expect(queue.finished() == nil)
        #expect(queue.inFlight == 0)
        #expect(queue.peakInFlight == 2)
    }

    @Test func aQueueOfNoneRefusesAtOnceWhenEveryCallIsInFlight() {
        var queue = HookQueue<String>(maxInFlight: 1, maxQueued: 0)
        guard case .start = queue.submit("a") else { Issue.record("the first call waits"); return }
        guard case .refused("b") = queue.submit("b") else { Issue.record("the second call is not refused"); return }
    }

    /// A client's own calls (publish, write, RPC) leave a quarter of the queue to the calls that
    /// admit clients, which wait ahead of them: one user's RPCs cannot shut everyone else out.
    @Test func callsThatAdmitClientsKeepAQuarterOfTheQueueAndGoFirst() {
        var queue = HookQueue<String>(maxInFlight: 1, maxQueued: 8)
        guard case .start = queue.submit("rpc0") else { Issue.record("the first call waits"); return }
        var refused: [String] = []
        for n in 1...8 {
            if case .refused(let call) = queue.submit("rpc\(n)") { refused.append(call) }
        }
        #expect(refused == ["rpc7", "rpc8"], "six of eight waiting places for RPCs")
        for name in ["connect", "subscribe"] {
            guard case .queued = queue.submit(name, admits: true) else { Issue.record("\(name) refused"); return }
        }
        guard case .refused = queue.submit("refresh", admits: true) else { Issue.record("past the whole queue"); return }
        #expect(queue.finished() == "connect")
        #expect(queue.finished() == "subscribe")
        #expect(queue.finished() == "rpc1")
    }

    /// A storm of calls that admit clients lets one other call through for every three, so a
    /// publish or an RPC is not held past its time-out for as long as connections keep coming.
    @Test func callsThatAdmitClientsLetEveryFourthCallBeAnother() {
        var queue = HookQueue<String>(maxInFlight: 1, maxQueued: 100)
        guard case .start = queue.submit("first") else { Issue.record("the first call waits"); return }
        for n in 1...2 { _ = queue.submit("rpc\(n)") }
        for n in 1...8 { _ = queue.submit("connect\(n)", admits: true) }
        let order = (0..<10).compactMap { _ in queue.finished() }
        #expect(order == ["connect1", "connect2", "connect3", "rpc1", "connect4", "connect5", "connect6", "rpc2", "connect7", "connect8"])
    }
}
