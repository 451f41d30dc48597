/// What this binary is, for `/metrics` (`receptionist_build_info`) and `--version`.
public enum BuildInfo {
    public static let version = "0.7.0"
    #if DEBUG
    public static let configuration = "debug"
    #else
    public static let configuration = "release"
    #endif
}
