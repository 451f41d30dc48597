@testable import ReceptionistGateway
import ReceptionistWire
import Testing

@Suite struct APIRequestCheckTests {
    private func request(_ target: String) -> HTTPRequest { request(.get, target) }

    private func request(_ method: HTTPMethod, _ target: String, _ headers: [(String, String)] = []) -> HTTPRequest {
        HTTPRequest(method: method, target: target, versionMajor: 1, versionMinor: 1, headers: HTTPHeaders(headers), body: [],
                    keepAlive: true, isUpgrade: false)
    }

    @Test func aParameterThatTakesOneValueMayNotRepeatButAListMay() {
        #expect(APIRequestCheck.repeatedParameter(request("/api/topics/t/events?since=1&since=2")) != nil)
        #expect(APIRequestCheck.repeatedParameter(request("/api/stores/s/events?old&old=false")) != nil)
        #expect(APIRequestCheck.repeatedParameter(request("/api/stores/s/events?models=a&models=b&paths=x&paths=y")) == nil)
        #expect(APIRequestCheck.repeatedParameter(request("/api/stores/s/changes?after=0&limit=5&until=9")) == nil)
        #expect(APIRequestCheck.repeatedParameter(request("/api/topics/t/events?since=1")) == nil)
    }

    @Test func aNameNoneCanHaveIsToldWhereverItStands() {
        #expect(APIRequestCheck.invalidName(["stores", "bad name"]) != nil)
        #expect(APIRequestCheck.invalidName(["stores", "ok", "models", "a\u{1}b"]) != nil)
        #expect(APIRequestCheck.invalidName(["topics", String(repeating: "x", count: 65), "messages"]) != nil)
        #expect(APIRequestCheck.invalidName(["stores", "ok", "models", "fine"]) == nil)
        #expect(APIRequestCheck.invalidName(["stores"]) == nil && APIRequestCheck.invalidName(["jobs", "a b"]) == nil)
    }

    @Test func aConditionAWriteWouldNotReadIsTold() {
        #expect(APIRequestCheck.unreadCondition(request(.delete, "/api/stores/s", [("If-Match", "\"1\"")]), ["stores", "s"]) != nil)
        #expect(APIRequestCheck.unreadCondition(request(.put, "/api/stores/s/models/m", [("if-match", "\"1\"")]), ["stores", "s", "models", "m"]) == nil)
        #expect(APIRequestCheck.unreadCondition(
            request(.put, "/api/stores/s/models/m", [("If-Unmodified-Since", "x")]), ["stores", "s", "models", "m"]) != nil)
        #expect(APIRequestCheck.unreadCondition(request(.get, "/api/stores/s", [("If-None-Match", "*")]), ["stores", "s"]) == nil)
    }
}
