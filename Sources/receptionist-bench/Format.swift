/// Number formatting for benchmark tables.
enum Format {
    /// `1234567` → `1.23M`.
    static func count(_ value: Double) -> String {
        switch value {
        case 1e9...: return fixed(value / 1e9, 2) + "G"
        case 1e6...: return fixed(value / 1e6, 2) + "M"
        case 1e3...: return fixed(value / 1e3, 1) + "k"
        default: return fixed(value, 0)
        }
    }

    static func ratio(_ value: Double) -> String { fixed(value, 2) }

    static func fixed(_ value: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        var text = "\(rounded)"
        if digits == 0 { return "\(Int(rounded))" }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let fraction = parts.count > 1 ? String(parts[1]) : ""
        text = String(parts[0]) + "." + fraction + String(repeating: "0", count: max(0, digits - fraction.count))
        return text
    }
}
