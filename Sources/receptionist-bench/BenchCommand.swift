import ArgumentParser

/// `receptionist-bench`: the load generators behind `make bench`.
@main
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receptionist-bench",
        abstract: "Benchmarks for Receptionist; `make bench` runs them side by side with peers.",
        subcommands: [ModelBench.self, WebSocketBench.self, PublishBench.self, ChangePublishBench.self]
    )
}
