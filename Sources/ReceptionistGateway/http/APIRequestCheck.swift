import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// What makes an API request a bad one whatever it asks of the store or topic it names: checked
/// before any lookup, hook or work.
enum APIRequestCheck {
    /// Why the store, model or topic that `segments` (the path after `/api/`) name cannot exist,
    /// if it cannot.
    static func invalidName(_ segments: [String]) -> String? {
        guard segments.count >= 2 else { return nil }
        switch segments[0] {
        case "stores":
            if let problem = PushHub.invalidName(.store(segments[1])) { return problem.message }
            guard segments.count == 4, segments[2] == "models", !ModelStore.isValidModelID(segments[3]) else { return nil }
            return StoreError.invalidModelID(segments[3]).description
        case "topics": return PushHub.invalidName(.topic(segments[1]))?.message
        default: return nil
        }
    }

    /// Why a write's condition header would be ignored, if one would: a condition is honoured or
    /// refused, never skipped (a store deleted despite its `If-Match`). Only a model's `PUT`,
    /// `PATCH` and `DELETE` read `If-Match` and `If-None-Match`; a change set refuses them itself,
    /// naming its body's conditions; no write reads `If-Unmodified-Since`.
    static func unreadCondition(_ request: HTTPRequest, _ segments: [String]) -> String? {
        switch request.method {
        case .post, .put, .patch, .delete: break
        default: return nil
        }
        let modelWrite = segments.count == 4 && segments[0] == "stores" && segments[2] == "models"
        let changeSet = segments.count == 3 && segments[0] == "stores" && segments[2] == "changes"
        let unread = modelWrite || changeSet ? unreadByModelWrites : conditions
        guard let header = unread.first(where: { request.headers[$0] != nil }) else { return nil }
        return "\(header.name) is not read on this request, so it could not hold it back; send it without"
    }

    /// Why the query string would be read other than as it was meant, if so: a parameter that
    /// takes one value given twice (`?old=true&old=false`), which one reading or another would
    /// settle silently. Lists (`models`, `paths`) may be given again, adding to the list.
    static func repeatedParameter(_ request: HTTPRequest) -> String? {
        guard let query = request.query, query.utf8.contains(UInt8(ascii: "&")) else { return nil }
        var seen: Set<Substring> = []
        for pair in query.split(separator: "&") {
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            guard singleValued.contains(name) else { continue }
            if !seen.insert(name).inserted { return "\(name) is given more than once; give it once" }
        }
        return nil
    }

    /// The query parameters that take one value.
    private static let singleValued: Set<Substring> = [
        "since", "epoch", "maxRate", "old", "presence", "heartbeat", "stats", "limit", "after", "at", "until", "token",
    ]

    private static let conditions: [KnownHeader] = [.ifMatch, .ifNoneMatch, .ifUnmodifiedSince]
    private static let unreadByModelWrites: [KnownHeader] = [.ifUnmodifiedSince]
}
