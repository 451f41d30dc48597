import ArgumentParser
import Glibc

/// Turns `RECEPTIONIST_<OPTION>` environment variables into command-line options.
///
/// The option list is read from the command's own declarations, so a new option gets its
/// environment variable without being listed twice.
enum EnvironmentArguments {
    struct Option: Equatable {
        let name: String
        let isFlag: Bool
        /// The option may be given more than once (an array of values).
        var isList = false
        var variable: String { "RECEPTIONIST_" + name.uppercased().replacingDashes() }
    }

    /// The list options whose variable may hold several values, separated by commas (an origin
    /// or a header name holds none; an API key might, so it is one value: use --api-key-file).
    static let separated: Set<String> = ["allowed-origin", "hook-forward-header"]

    /// What a flag's variable may say for no.
    static let noValues: Set<String> = ["0", "false", "no", "off", ""]

    static func current() -> [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }

    /// The long options a command declares, from its property wrappers.
    static func options(of command: some ParsableArguments) -> [Option] {
        Mirror(reflecting: command).children.compactMap { child in
            guard var label = child.label else { return nil }
            if label.hasPrefix("_") { label.removeFirst() }
            let typeName = String(describing: type(of: child.value))
            let isFlag = typeName.hasPrefix("Flag<")
            guard isFlag || typeName.hasPrefix("Option<") else { return nil }
            return Option(name: kebab(label), isFlag: isFlag, isList: typeName.hasPrefix("Option<Array<"))
        }
    }

    /// Appends an option for every variable that is set and whose option is not already given.
    /// A flag's variable must say yes or no (`1`, `true`, `yes`, `on`; `0`, `false`, `no`, `off`,
    /// empty); anything else is refused, never taken for yes.
    static func merge(arguments: [String], environment: [String: String], options: [Option]) throws(ValidationError) -> [String] {
        var result = arguments
        for option in options {
            guard let value = environment[option.variable] else { continue }
            let flag = "--" + option.name
            let given = arguments.contains { $0 == flag || $0.hasPrefix(flag + "=") || $0 == "--no-" + option.name }
            guard !given else { continue }
            if option.isFlag {
                switch value.lowercased() {
                case "1", "true", "yes", "on": result.append(flag)
                case let no where noValues.contains(no): break
                default:
                    throw ValidationError("\(option.variable) must be 1, true, yes or on, or 0, false, no, off or empty, not '\(value)'")
                }
            } else if separated.contains(option.name) {
                // A list in one variable: its values separated by commas.
                for item in value.split(separator: ",") { result.append(flag + "=" + String(item.filter { $0 != " " && $0 != "\t" })) }
            } else {
                result.append(flag + "=" + value)
            }
        }
        return result
    }

    /// The flags whose variable says no: they win over a file that sets them, as every variable
    /// does (a flag said no adds nothing to the arguments, so the file could not see it).
    static func flagsTurnedOff(environment: [String: String], options: [Option]) -> Set<String> {
        Set(options.filter { option in
            option.isFlag && environment[option.variable].map { noValues.contains($0.lowercased()) } == true
        }.map(\.name))
    }

    private static func kebab(_ name: String) -> String {
        var out = ""
        for character in name {
            if character.isUppercase {
                out += "-" + character.lowercased()
            } else {
                out.append(character)
            }
        }
        return out
    }
}

extension String {
    fileprivate func replacingDashes() -> String {
        String(map { $0 == "-" ? "_" : $0 })
    }
}
