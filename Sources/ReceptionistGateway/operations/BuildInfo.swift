import CBuildStamp

/// What this binary is, for `/metrics` (`receptionist_build_info`) and `--version`.
public enum BuildInfo {
    public static let version = "0.8.0"
    #if DEBUG
    public static let configuration = "debug"
    #else
    public static let configuration = "release"
    #endif

    /// The git commit the binary was built from (`scripts/stamp-commit.py` writes it in after the
    /// link), or `unknown` for a binary nobody stamped.
    public static let commit: String = {
        let text = String(cString: receptionist_build_commit())
        return text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
            && text.utf8.count == 40 ? text : "unknown"
    }()

    /// What `receptionist --version` prints: `0.8.0 (commit 1f2e…, release)`.
    public static var description: String { "\(version) (commit \(commit), \(configuration))" }
}
