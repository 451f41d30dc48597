import ArgumentParser

/// How a subscriber joins the topic on the server under test.
enum Dialect: String, ExpressibleByArgument, CaseIterable {
    /// Receptionist: subprotocol `receptionist.v1`, then a `subscribe` message, answered `subscribed`.
    case receptionist
    /// A peer whose URL is the subscription (nchan, a uWebSockets app): subscribed once upgraded.
    case raw
}
