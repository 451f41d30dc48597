@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

@Suite struct PushEncoderTests {
    private func decode(_ bytes: [UInt8]) throws -> JSONValue { try JSONParser.parse(bytes) }

    @Test func aChangeSetIsOneObjectWithEveryChange() throws {
        let changeSet = ChangeSet(store: "tiles", version: 7, committedAtMicroseconds: 1_700_000_000_000_001, changes: [
            ModelChange(model: "tile-1", keyPath: "color", oldValue: "#000000", newValue: "#ff0000"),
            ModelChange(model: "tile-2", keyPath: .whole, oldValue: ["color": "#000000"], newValue: nil),
            ModelChange(model: "tile-3", keyPath: "style.border", oldValue: nil, newValue: ["width": 2]),
        ])
        let value = try decode(PushEncoder.changes(changeSet))
        #expect(value == [
            "type": "changes", "store": "tiles", "version": 7, "committedAt": .number(JSONNumber(1_700_000_000_000_001)),
            "changes": [
                ["model": "tile-1", "path": "color", "kind": "updated", "value": "#ff0000"],
                ["model": "tile-2", "path": "", "kind": "deleted", "value": nil],
                ["model": "tile-3", "path": "style.border", "kind": "created", "value": ["width": 2]],
            ],
        ])
    }

    @Test func namesAndValuesAreEscaped() throws {
        let changeSet = ChangeSet(store: "s", version: 1, committedAtMicroseconds: 0, changes: [
            ModelChange(model: "a\"b\\c\n", keyPath: "x", oldValue: nil, newValue: "<img src=x onerror=alert(1)>\u{2028}"),
        ])
        let value = try decode(PushEncoder.changes(changeSet))
        #expect(value["changes"] == [["model": "a\"b\\c\n", "path": "x", "kind": "created", "value": "<img src=x onerror=alert(1)>\u{2028}"]])
    }

    /// A topic message is written in one sized pass: byte for byte the wire form, the data as the
    /// publisher sent it, at the widest numbers and with a name that needs escaping.
    @Test func aTopicMessageIsExactlyItsWireForm() {
        let data = Array(#"{"a": [1, "two", null]}"#.utf8)
        let text = String(decoding: PushEncoder.message(topic: "t", seq: 5, publishedAt: 6, data: data), as: UTF8.self)
        #expect(text == #"{"type":"message","topic":"t","seq":5,"publishedAt":6,"data":{"a": [1, "two", null]}}"#)
        // Sized exactly, at the widest numbers, for a name that needs no escape (the sized path).
        let sized = PushEncoder.message(topic: "news.eu-1_x", seq: .max, publishedAt: 0, data: data)
        #expect(String(decoding: sized, as: UTF8.self)
            == #"{"type":"message","topic":"news.eu-1_x","seq":18446744073709551615,"publishedAt":0,"data":{"a": [1, "two", null]}}"#)
        let widest = PushEncoder.message(topic: #"q"\"#, seq: .max, publishedAt: .max, data: data)
        #expect(String(decoding: widest, as: UTF8.self)
            == #"{"type":"message","topic":"q\"\\","seq":18446744073709551615,"publishedAt":18446744073709551615,"data":{"a": [1, "two", null]}}"#)
    }

    @Test func everyOtherMessageMatchesTheProtocol() throws {
        let snapshot = StoreSnapshot(store: "s", version: 3, models: ["m": ["color": "#123456"]])
        #expect(try decode(PushEncoder.snapshot(snapshot, reset: true, epoch: "e1"))
            == ["type": "snapshot", "store": "s", "version": 3, "epoch": "e1", "reset": true, "models": ["m": ["color": "#123456"]]])
        #expect(try decode(PushEncoder.subscribedStore("s", version: 9, epoch: "e1"))
            == ["type": "subscribed", "store": "s", "version": 9, "epoch": "e1", "resumed": true])
        #expect(try decode(PushEncoder.subscribedTopic("t", seq: 4, epoch: "e2", resumed: false))
            == ["type": "subscribed", "topic": "t", "seq": 4, "epoch": "e2", "resumed": false])
        #expect(try decode(PushEncoder.subscribedTopic("t", seq: 4, epoch: "e2", resumed: false, reset: true))
            == ["type": "subscribed", "topic": "t", "seq": 4, "epoch": "e2", "reset": true, "resumed": false])
        #expect(try decode(PushEncoder.topicReset("t", seq: 0, epoch: "e3")) == ["type": "reset", "topic": "t", "seq": 0, "epoch": "e3"])
        #expect(try decode(PushEncoder.message(topic: "t", seq: 5, publishedAt: 6, data: json([1, "two", nil])))
            == ["type": "message", "topic": "t", "seq": 5, "publishedAt": 6, "data": [1, "two", nil]])
        #expect(try decode(PushEncoder.gap(topic: "t", from: 2, to: 8)) == ["type": "gap", "topic": "t", "from": 2, "to": 8])
        #expect(try decode(PushEncoder.unsubscribed(.topic("t"))) == ["type": "unsubscribed", "topic": "t"])
        #expect(try decode(PushEncoder.error(ClientMessage.Problem(.badMessage, "why"))) == ["type": "error", "code": "bad_message", "message": "why"])
        #expect(try decode(PushEncoder.conflated(store: "s", version: 9, from: 4, changes: []))
            == ["type": "changes", "store": "s", "version": 9, "from": 4, "conflated": true, "changes": []])
    }
}
