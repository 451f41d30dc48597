import ArgumentParser
import ReceptionistGateway

/// The `receptionist` command line.
@main
struct ReceptionistCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receptionist",
        abstract: "A real-time push gateway: live model state over WebSocket, SSE and HTTP.",
        discussion: """
            Every option can also be set through the environment as RECEPTIONIST_<OPTION>, \
            for example RECEPTIONIST_PORT=9000 or RECEPTIONIST_MAX_HEAD_BYTES=8192. \
            A flag given on the command line wins over the environment, and the environment \
            over a --config file (YAML or JSON, keyed by the options' long names, plus namespaces).
            """,
        version: BuildInfo.description,
        subcommands: [ServeCommand.self],
        defaultSubcommand: ServeCommand.self
    )

    static func main() {
        let options = EnvironmentArguments.options(of: ServeCommand())
        var arguments: [String]
        do {
            arguments = try EnvironmentArguments.merge(
                arguments: Array(CommandLine.arguments.dropFirst()), environment: EnvironmentArguments.current(), options: options)
        } catch {
            exit(withError: error)
        }
        if let path = ConfigFile.path(in: arguments) {
            do {
                arguments = try ConfigFile.load(path, options: options).merge(into: arguments)
            } catch {
                exit(withError: ValidationError("\(path): \(error)"))
            }
        }
        main(arguments)
    }
}
