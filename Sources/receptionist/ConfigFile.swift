import ArgumentParser
import Foundation
import ReceptionistGateway
import Yams

/// `--config FILE`: every `serve` option by its long name, and `namespaces`, in YAML or JSON.
///
/// The file's options are appended to the command line for each option the command line and the
/// environment did not give, so the order of precedence is command line, environment, file, and
/// every value is checked by the same parser as on the command line. A key that is not an option,
/// or a value of the wrong shape, is refused at start with the line and the key named.
struct ConfigFile {
    struct Problem: Error, CustomStringConvertible {
        let line: Int
        let key: String
        let detail: String
        var description: String { "config file, line \(line): " + (key.isEmpty ? "the file" : "'\(key)'") + " \(detail)" }
    }

    /// The options the file gives, as command-line arguments, with the line each came from.
    var arguments: [(name: String, argument: String, line: Int)] = []
    var namespaces = Namespaces()

    /// The file `--config` (or `--config=`) names among `arguments`, if any.
    static func path(in arguments: [String]) -> String? {
        for (index, argument) in arguments.enumerated() {
            if argument.hasPrefix("--config=") { return String(argument.dropFirst("--config=".count)) }
            if argument == "--config", index + 1 < arguments.count { return arguments[index + 1] }
        }
        return nil
    }

    static func load(_ path: String, options: [EnvironmentArguments.Option]) throws -> ConfigFile {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw Problem(line: 0, key: path, detail: "cannot be read (a file of UTF-8 text)")
        }
        guard data.count <= maxBytes else { throw Problem(line: 0, key: path, detail: "is larger than \(maxBytes) bytes") }
        return try parse(text, options: options)
    }

    /// Bounds on a file: the YAML parser builds its tree by recursion, and a file nested 10,000
    /// deep ended the process (a config is a few kilobytes, nested a few levels).
    static let maxBytes = 1 << 20
    static let maxDepth = 64

    static func parse(_ text: String, options: [EnvironmentArguments.Option]) throws -> ConfigFile {
        if let line = Self.lineTooDeep(text) {
            throw Problem(line: line, key: "", detail: "nests collections more than \(maxDepth) deep")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw Problem(line: Self.line(of: error), key: "", detail: "is not YAML or JSON: \(error)")
        }
        var file = ConfigFile()
        guard let root else { return file }
        guard let mapping = root.mapping else { throw Problem(line: root.mark?.line ?? 1, key: "", detail: "must be a mapping of options") }
        var seen: Set<String> = []
        for (keyNode, value) in mapping {
            let key = keyNode.string ?? ""
            let line = keyNode.mark?.line ?? 0
            guard seen.insert(key).inserted else { throw Problem(line: line, key: key, detail: "is given twice") }
            if key == "namespaces" {
                file.namespaces = try NamespaceFile.parse(value, line: line)
                continue
            }
            guard key != "config" else { throw Problem(line: line, key: key, detail: "cannot be given in a config file") }
            guard let option = options.first(where: { $0.name == key }) else {
                throw Problem(line: line, key: key, detail: "is not an option of receptionist serve (see --help)")
            }
            for argument in try arguments(option, value, line: line) { file.arguments.append((key, argument, line)) }
        }
        return file
    }

    private static func arguments(_ option: EnvironmentArguments.Option, _ value: Node, line: Int) throws -> [String] {
        let flag = "--" + option.name
        if option.isFlag {
            guard let on = value.bool else { throw Problem(line: line, key: option.name, detail: "must be true or false") }
            return on ? [flag] : []
        }
        if let items = value.sequence {
            guard option.isList else { throw Problem(line: line, key: option.name, detail: "takes one value, not a list") }
            return try items.map { item in
                guard let text = item.scalar?.string else { throw Problem(line: line, key: option.name, detail: "must be a list of values") }
                return flag + "=" + text
            }
        }
        guard let text = value.scalar?.string else { throw Problem(line: line, key: option.name, detail: "must be a value or a list of values") }
        return [flag + "=" + text]
    }

    /// Appends the file's options that `arguments` (the command line and environment) do not give.
    func merge(into arguments: [String], except turnedOff: Set<String> = []) -> [String] {
        var result = arguments
        for (name, argument, _) in self.arguments where !turnedOff.contains(name) {
            let flag = "--" + name
            let given = arguments.contains { $0 == flag || $0.hasPrefix(flag + "=") || $0 == "--no-" + name }
            if !given { result.append(argument) }
        }
        return result
    }

    /// The file's line that gave the option a command-line `message` (a parse or validation
    /// error) names first, if the file gave it and `arguments` (command line and environment) did
    /// not: a value of the wrong kind is then told with its line, as a key of the wrong shape is.
    func line(namedIn message: String, given arguments: [String]) -> (name: String, line: Int)? {
        var first: (at: String.Index, name: String, line: Int)?
        for (name, _, line) in self.arguments {
            let flag = "--" + name
            guard !arguments.contains(where: { $0 == flag || $0.hasPrefix(flag + "=") }) else { continue }
            var searched = message.startIndex
            while let found = message.range(of: flag, range: searched..<message.endIndex) {
                searched = found.upperBound
                // `--history` is not `--history-bytes`.
                if found.upperBound < message.endIndex, message[found.upperBound].isLetter || message[found.upperBound] == "-" { continue }
                if first.map({ found.lowerBound < $0.at }) ?? true { first = (found.lowerBound, name, line) }
                break
            }
        }
        return first.map { ($0.name, $0.line) }
    }

    /// Puts the file's namespaces into `config`, after the options (the disk's, `--history`).
    static func applyNamespaces(
        of path: String, to config: inout GatewayConfig, options: [EnvironmentArguments.Option]
    ) throws {
        let namespaces = try load(path, options: options).namespaces
        for namespace in namespaces.list where (namespace.history ?? 0) > config.historyLimit {
            throw ValidationError(
                "\(path): namespace '\(namespace.pattern)' keeps a history of \(namespace.history!), more than --history (\(config.historyLimit))")
        }
        config.namespaces = namespaces
        if var disk = config.disk, !namespaces.list.isEmpty {
            let retain = disk.retain
            disk.retainOf = { namespaces.retain(of: $0, default: retain) }
            config.disk = disk
        }
    }

    private static func line(of error: YamlError) -> Int {
        switch error {
        case .scanner(_, _, let mark, _), .parser(_, _, let mark, _): return mark.line
        default: return 0
        }
    }

    /// The line where flow collections (`[`, `{`) first nest past `maxDepth`, outside quotes and
    /// comments; nil if they never do. Block collections nest by indentation, which a file within
    /// `maxBytes` cannot take deep enough to matter.
    private static func lineTooDeep(_ text: String) -> Int? {
        var depth = 0, line = 1
        var quote: UInt8?, comment = false
        for byte in text.utf8 {
            if byte == UInt8(ascii: "\n") { line += 1; comment = false; continue }
            if comment { continue }
            if let open = quote {
                if byte == open { quote = nil }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "'"): quote = byte
            case UInt8(ascii: "#"): comment = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > maxDepth { return line }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth = max(0, depth - 1)
            default: break
            }
        }
        return nil
    }
}
