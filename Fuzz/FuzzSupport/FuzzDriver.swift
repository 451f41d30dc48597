#if FUZZING
import CLibFuzzer
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The body of one fuzz target: takes one input and returns 0 (libFuzzer's contract).
public typealias FuzzTestOneInput = @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32

/// Runs a fuzz target's `main`.
///
/// SwiftPM links every executable with its entry point renamed to `<Module>_main` and aliases
/// `main` to it, so libFuzzer's own `main` can never be the program's: the target keeps an
/// ordinary `@main` that lands here. Built with `-sanitize=fuzzer,address -DFUZZING`, this hands
/// the command line to libFuzzer's driver. In any other build it replays the files and folders
/// named on the command line through the same function, so a corpus or a crash file can be rerun
/// from a plain debug build.
public enum FuzzDriver {
    public static func main(_ testOneInput: FuzzTestOneInput) -> Never {
        #if FUZZING
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
        #else
        let paths = CommandLine.arguments.dropFirst().filter { !$0.hasPrefix("-") }
        guard !paths.isEmpty else {
            print("usage: \(CommandLine.arguments[0]) FILE|DIR...  (replays inputs; build with -DFUZZING to fuzz)")
            exit(2)
        }
        var count = 0
        for path in paths {
            for file in files(at: path) {
                guard let bytes = read(file) else {
                    print("cannot read \(file)")
                    exit(1)
                }
                _ = bytes.withUnsafeBufferPointer { testOneInput($0.baseAddress, $0.count) }
                count += 1
            }
        }
        print("replayed \(count) inputs")
        exit(0)
        #endif
    }

    /// The regular files in a folder (not recursively, in name order), or the path itself.
    static func files(at path: String) -> [String] {
        guard let directory = opendir(path) else { return [path] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if entry.pointee.d_type == UInt8(DT_REG) { names.append(name) }
        }
        return names.sorted().map { path + "/" + $0 }
    }

    static func read(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let got = fread(&chunk, 1, chunk.count, file)
            bytes += chunk[..<got]
            if got < chunk.count { return ferror(file) == 0 ? bytes : nil }
        }
    }
}

/// Stops the run when an invariant fails. A trap is what libFuzzer records as a crash, with the
/// input that caused it saved beside the message.
public func fuzzCheck(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
    file: StaticString = #fileID, line: UInt = #line
) {
    if !condition() {
        fatalError("invariant broken: \(message())", file: file, line: line)
    }
}
