import ReceptionistPush
import ReceptionistWire

/// What makes an API request a bad one whatever it asks of the store or topic it names: checked
/// before any lookup, hook or work.
enum APIRequestCheck {
    /// Why `name` cannot be the store's or topic's that `kind` (a path's first segment) names.
    static func invalidName(kind: String, _ name: String) -> String? {
        switch kind {
        case "stores": PushHub.invalidName(.store(name))?.message
        case "topics": PushHub.invalidName(.topic(name))?.message
        default: nil
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
        return "\(header) is not read on this request, so it could not hold it back; send it without"
    }

    private static let conditions = ["If-Match", "If-None-Match", "If-Unmodified-Since"]
    private static let unreadByModelWrites = ["If-Unmodified-Since"]
}
