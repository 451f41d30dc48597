@testable import ReceptionistGateway
import Testing

@Suite struct NamespacesTests {
    private let namespaces = Namespaces([
        .init(pattern: "orders.eu", history: 5),
        .init(pattern: "orders.*", presence: false, clientPublish: false, hooks: [.subscribe], maxRate: 2),
        .init(pattern: "*", history: 50),
    ])

    @Test func theFirstMatchingPatternApplies() {
        #expect(namespaces.history(of: "orders.eu", default: 100) == 5)
        // orders.eu's namespace leaves presence out: it is the gateway's, not the next pattern's.
        #expect(namespaces.allowsPresence(of: "orders.eu"))
        #expect(!namespaces.allowsPresence(of: "orders.us"))
        #expect(namespaces.history(of: "orders.us", default: 100) == 100)
        #expect(namespaces.history(of: "chat", default: 100) == 50)
    }

    @Test func settingsOfANamespace() {
        #expect(!namespaces.allowsClientPublish(to: "orders.us") && namespaces.allowsClientPublish(to: "chat"))
        #expect(namespaces.calls(.subscribe, for: "orders.us") && !namespaces.calls(.publish, for: "orders.us"))
        #expect(namespaces.calls(.publish, for: "chat"))
        #expect(namespaces.maxRate(of: "orders.us") == 2 && namespaces.maxRate(of: "chat") == nil)
    }

    @Test func noNamespacesIsTheGatewaysSettings() {
        let none = Namespaces()
        #expect(none.history(of: "x", default: 7) == 7 && none.allowsPresence(of: "x") && none.calls(.write, for: "x"))
    }

    @Test func aPatternThatMatchesNoNameIsAProblem() {
        for pattern in ["*", "chat", "orders.*", "a", "-.*", String(repeating: "a", count: 64), String(repeating: "a", count: 64) + "*", ".*"] {
            #expect(Namespaces.Namespace.problem(with: pattern) == nil, "\(pattern)")
        }
        for pattern in ["*.orders", "a*b", "**", "bad name", "é*", String(repeating: "a", count: 65), String(repeating: "a", count: 65) + "*"] {
            #expect(Namespaces.Namespace.problem(with: pattern) != nil, "\(pattern)")
        }
    }

    @Test func aPatternCoversThoseWhoseNamesItAllMatches() {
        let orders = Namespaces.Namespace(pattern: "orders.*"), every = Namespaces.Namespace(pattern: "*")
        #expect(every.covers(orders) && every.covers(.init(pattern: "chat")))
        #expect(orders.covers(.init(pattern: "orders.eu")) && orders.covers(.init(pattern: "orders.eu.*")) && orders.covers(orders))
        #expect(!orders.covers(every) && !orders.covers(.init(pattern: "order*")) && !orders.covers(.init(pattern: "chat")))
        #expect(Namespaces.Namespace(pattern: "chat").covers(.init(pattern: "chat")))
        #expect(!Namespaces.Namespace(pattern: "chat").covers(.init(pattern: "chat*")))
    }
}
