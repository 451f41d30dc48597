import Glibc
import ReceptionistWire

/// The `Date` header value, formatted at most once per second.
///
/// Loop thread only.
final class DateCache {
    private var second = -1
    private var text = ""

    var current: String {
        let now = Int(time(nil))
        if now != second {
            second = now
            text = HTTPDate.format(epochSeconds: now)
        }
        return text
    }
}
