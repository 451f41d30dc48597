import ArgumentParser

/// How a publisher paces itself by the subscribers' progress (`SubscriberPace`), shared by the
/// HTTP and the WebSocket publisher so both are paced alike.
struct PaceOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Files the subscriber processes count their deliveries in (ws --progress-file), comma-separated.",
            discussion: "The publisher then stays at most --ahead messages in front of the average subscriber, "
                + "as a backend that watches its consumers would."))
    var paceFiles = ""

    @Option(help: "Subscribers whose deliveries --pace-files count.")
    var paceSubscribers = 0

    @Option(help: "With --pace-files, the most messages the publisher may be in front of the average subscriber.")
    var ahead = 32

    func validate() throws {
        guard paceFiles.isEmpty || (paceSubscribers > 0 && ahead > 0) else {
            throw ValidationError("--pace-files needs a positive --pace-subscribers and --ahead")
        }
    }

    /// Nil without --pace-files.
    func make() throws -> SubscriberPace? {
        guard !paceFiles.isEmpty else { return nil }
        return try SubscriberPace(
            files: paceFiles.split(separator: ",").map(String.init), subscribers: paceSubscribers, ahead: ahead)
    }
}
