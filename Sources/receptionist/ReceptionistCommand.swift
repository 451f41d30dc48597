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
        let given = Array(CommandLine.arguments.dropFirst())
        // Help and the version are about the command, not a gateway: the environment's options
        // (which a container sets) are not theirs.
        if given.first == "help" || given.contains(where: { ["--help", "-h", "--version"].contains($0) }) { main(given) }
        let options = EnvironmentArguments.options(of: ServeCommand())
        let environment = EnvironmentArguments.current()
        var arguments: [String]
        do {
            arguments = try EnvironmentArguments.merge(arguments: given, environment: environment, options: options)
        } catch {
            exit(withError: error)
        }
        if let path = ConfigFile.path(in: arguments) {
            let given = arguments
            do {
                let off = EnvironmentArguments.flagsTurnedOff(environment: environment, options: options)
                let file = try ConfigFile.load(path, options: options)
                arguments = file.merge(into: arguments, except: off)
                // A value the file gave that the option refuses is told with the file's line.
                do {
                    _ = try parseAsRoot(arguments)
                } catch {
                    let message = message(for: error)
                    if let (name, line) = file.line(namedIn: message, given: given) {
                        throw ConfigFile.Problem(line: line, key: name, detail: "is refused: \(message)")
                    }
                }
            } catch {
                exit(withError: ValidationError("\(path): \(error)"))
            }
        }
        main(arguments)
    }
}
