@testable import ReceptionistPush
import ReceptionistTestSupport
import ReceptionistWire
import Testing

/// Every subscribed connection holds a `Subscription`: it is held to the malloc size class the
/// idle memory figure was measured with, and what few subscriptions use stays out of line.
@Suite struct SubscriptionFootprintTests {
    @Test func aPlainSubscriptionFitsItsSizeClass() {
        let sink = FakeSink()
        let subscription = Subscription(target: .topic("a-topic-name-longer-than-inline"), sink: sink)
        #expect(heapBytes(of: subscription) <= 88)
        #expect(subscription.options.isNone)
        #expect(!subscription.followsPresence)
        #expect(!subscription.isConflating)
    }

    @Test func optionsAndAPresenceWatchShareTheirBox() {
        let sink = FakeSink()
        let options = SubscriptionOptions(models: ["m1"])
        let subscription = Subscription(target: .store("s"), sink: sink, options: options)
        #expect(subscription.options == options)
        subscription.presenceWatch = PresenceWatch()
        #expect(subscription.followsPresence)
        #expect(subscription.options == options)
        subscription.presenceWatch = nil
        #expect(!subscription.followsPresence)
        #expect(subscription.options == options)
    }
}
