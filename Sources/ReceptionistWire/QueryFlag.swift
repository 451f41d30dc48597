/// A yes-or-no query parameter (`old`, `presence`, `stats`), read one way everywhere: `true`, `1`
/// or the bare name (`?old`, `?old=`) for yes, `false` or `0` for no. A pure value.
public enum QueryFlag {
    /// The flag's value: false when the parameter is absent (`text` nil), nil when `text` is
    /// neither yes nor no.
    public static func value(_ text: String?) -> Bool? {
        switch text {
        case nil: false
        case "true", "1", "": true
        case "false", "0": false
        default: nil
        }
    }

    /// What a refusal says of a flag `name` given as `text`.
    public static func problem(_ name: String, _ text: String) -> String {
        "\(name) must be true or false (or 1 or 0), not '\(text)'"
    }
}
