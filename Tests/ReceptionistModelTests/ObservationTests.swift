import Dispatch
import Glibc
import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync
import Testing

@Suite struct ObservationTests {
    @Test func filtersByModelAndKeyPathAndOptions() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "a", value: ["style": ["width": 1], "color": "red"]), .put(model: "b", value: [:])])
        let received = PThreadLock<[ModelChange]>([])
        let token = store.observe(model: "a", keyPathPrefix: "style", options: .old) { changeSet in
            received.withLock { $0 += changeSet.changes }
        }
        try store.commit([.set(model: "a", keyPath: "color", value: "blue")])  // other path
        try store.commit([.set(model: "b", keyPath: "style.width", value: 5)])  // other model
        try store.commit([.set(model: "a", keyPath: "style.width", value: 2)])  // match
        try store.commit([.put(model: "a", value: ["style": ["width": 3]])])  // ancestor replaced: affects it
        let changes = received.withLock { $0 }
        #expect(changes.count == 2)
        #expect(changes[0].keyPath == "style.width")
        #expect(changes[0].oldValue == 1)
        #expect(changes[0].newValue == nil)  // only .old was asked for
        #expect(changes[1].keyPath == .whole)
        token.cancel()
    }

    @Test func observersAddedDuringNotificationStartWithTheNextChange() throws {
        let store = ModelStore(name: "s")
        let late = PThreadLock<[UInt64]>([])
        let lateToken = PThreadLock<ObservationToken?>(nil)
        let first = store.observe { changeSet in
            guard lateToken.withLock({ $0 }) == nil else { return }
            let token = store.observe { late.withLock { $0.append(changeSet.version) }; _ = $0 }
            lateToken.withLock { $0 = token }
        }
        try store.commit([.put(model: "m", value: [:])])
        #expect(late.withLock { $0 }.isEmpty)
        try store.commit([.put(model: "m", value: ["x": 1])])
        #expect(late.withLock { $0 }.count == 1)
        first.cancel()
        lateToken.withLock { $0 }?.cancel()
    }

    @Test func removalDuringNotificationIsFinal() throws {
        let store = ModelStore(name: "s")
        let calls = PThreadLock((selfRemover: 0, victim: 0))
        let victimToken = PThreadLock<ObservationToken?>(nil)
        let selfToken = PThreadLock<ObservationToken?>(nil)
        // Registered first: removes itself and the victim from inside its call.
        let remover = store.observe { _ in
            calls.withLock { $0.selfRemover += 1 }
            selfToken.withLock { $0 }?.cancel()
            victimToken.withLock { $0 }?.cancel()
        }
        selfToken.withLock { $0 = remover }
        victimToken.withLock { $0 = store.observe { _ in calls.withLock { $0.victim += 1 } } }
        for n in 0..<3 {
            try store.commit([.put(model: "m", value: ["n": .number(JSONNumber(Double(n)))])])
        }
        let result = calls.withLock { $0 }
        #expect(result.selfRemover == 1)
        #expect(result.victim == 0)
        #expect(store.observerCount == 0)
    }

    @Test(.timeLimit(.minutes(10)))
    func onceCancelReturnsTheObserverIsNeverCalledAgain() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["n": 0])])
        for _ in 0..<Int(50 * stressScale) + 1 {
            let calls = PThreadLock(0)
            let token = store.observe { _ in
                calls.withLock { $0 += 1 }
                usleep(100)  // widen the window in which cancel races a call in progress
            }
            let committing = DispatchGroup()
            DispatchQueue.global().async(group: committing) {
                for n in 0..<200 {
                    try! store.commit([.set(model: "m", keyPath: "n", value: .number(JSONNumber(Double(n))))])
                }
            }
            _ = eventually { calls.withLock { $0 } > 0 }
            token.cancel()
            let atCancel = calls.withLock { $0 }
            #expect(committing.wait(timeout: .now() + 30) == .success)
            #expect(calls.withLock { $0 } == atCancel)
        }
    }

    @Test func releasingTheTokenEndsTheObservation() throws {
        let store = ModelStore(name: "s")
        let calls = PThreadLock(0)
        do {
            let token = store.observe { _ in calls.withLock { $0 += 1 } }
            try store.commit([.put(model: "m", value: [:])])
            withExtendedLifetime(token) {}
        }
        try store.commit([.put(model: "m", value: ["x": 1])])
        #expect(calls.withLock { $0 } == 1)
        #expect(store.observerCount == 0)
    }
}
