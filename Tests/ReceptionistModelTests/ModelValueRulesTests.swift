import ReceptionistJSON
@testable import ReceptionistModel
import Testing

@Suite struct ModelValueRulesTests {
    /// `levels` objects, one inside the next, around a number: a value `levels + 1` deep.
    private func nested(_ levels: Int) -> JSONValue {
        var value: JSONValue = 1
        for _ in 0..<levels { value = ["k": value] }
        return value
    }

    @Test func memberNamesAKeyPathCannotNameAreFoundAtAnyDepth() {
        #expect(ModelValueRules.problem(in: ["style": ["color": "red"], "list": [1, ["a": 2]]]) == nil)
        #expect(ModelValueRules.problem(in: ["a.b": 1])?.contains("'a.b'") == true)
        #expect(ModelValueRules.problem(in: ["x": ["": 1]])?.contains("empty") == true)
        #expect(ModelValueRules.problem(in: ["x": [1, ["q": ["k.": 1]]]])?.contains("'k.'") == true, "inside an array too")
        // A string value may hold anything.
        #expect(ModelValueRules.problem(in: ["x": "a.b", "y": ""]) == nil)
    }

    @Test func nestingIsCountedWithTheKeyPathUpToTheParsersLimit() {
        #expect(ModelValueRules.depth(of: 1, limit: 10) == 1)
        #expect(ModelValueRules.depth(of: nested(3), limit: 10) == 4)
        #expect(ModelValueRules.depth(of: nested(300), limit: 10) == 11, "counted only just past the limit")
        #expect(ModelValueRules.problem(in: nested(JSONParser.maxDepth - 1)) == nil)
        #expect(ModelValueRules.problem(in: nested(JSONParser.maxDepth)) != nil)
        #expect(ModelValueRules.problem(setting: nested(155), keyPathCount: 100) == nil)
        #expect(ModelValueRules.problem(setting: nested(156), keyPathCount: 100) != nil)
        #expect(ModelValueRules.problem(setting: "x", keyPathCount: 255) == nil)
        #expect(ModelValueRules.problem(setting: "x", keyPathCount: 256) != nil)
        #expect(ModelValueRules.problem(setting: nil, keyPathCount: 1000) == nil, "a removal makes nothing deeper")
    }

    @Test func aSetsValueFollowsTheMemberNamesRule() {
        #expect(ModelValueRules.problem(setting: "red", keyPathCount: 1) == nil)
        #expect(ModelValueRules.problem(setting: ["a.b": 1], keyPathCount: 1) != nil)
        #expect(ModelValueRules.problem(setting: [["": 1]], keyPathCount: 1) != nil)
    }

    @Test func aStoreRefusesSuchAWriteAndChangesNothing() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["x": 1])])
        #expect(throws: StoreError.self) { try store.commit([.put(model: "n", value: ["a.b": 1])]) }
        #expect(throws: StoreError.self) { try store.commit([.patch(model: "m", patch: ["": 1])]) }
        #expect(throws: StoreError.self) { try store.commit([.set(model: "m", keyPath: "y", value: nested(JSONParser.maxDepth))]) }
        #expect(store.version == 1 && store.snapshot().models == ["m": ["x": 1]])
    }
}
