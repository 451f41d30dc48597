import ReceptionistJSON
@testable import ReceptionistModel
import Testing

@Suite struct CommitConditionTests {
    private func tags(_ known: [String: UInt64]) -> (String) -> UInt64? { { known[$0] } }

    @Test func noConditionAlwaysHolds() {
        #expect(CommitCondition.none.isNone)
        #expect(CommitCondition.none.failure(version: 9, modelVersion: tags([:])) == nil)
    }

    @Test func theStoreVersionMustBeTheOneExpected() {
        let condition = CommitCondition(storeVersion: 4)
        #expect(condition.failure(version: 4, modelVersion: tags([:])) == nil)
        #expect(condition.failure(version: 5, modelVersion: tags([:]))
            == .preconditionFailed("the store is at version 5, not 4", version: 5))
    }

    @Test func aModelMustHaveOneOfItsTagsBePresentOrBeAbsent() {
        let models = tags(["a": 3, "b": 7])
        #expect(CommitCondition(models: ["a": .version([3])]).failure(version: 7, modelVersion: models) == nil)
        #expect(CommitCondition(models: ["a": .version([1, 3])]).failure(version: 7, modelVersion: models) == nil)
        #expect(CommitCondition(models: ["a": .version([2])]).failure(version: 7, modelVersion: models)
            == .preconditionFailed("model 'a' has the tag \"3\"", version: 7))
        #expect(CommitCondition(models: ["c": .version([2])]).failure(version: 7, modelVersion: models)
            == .preconditionFailed("model 'c' does not exist", version: 7))
        #expect(CommitCondition(models: ["b": .exists]).failure(version: 7, modelVersion: models) == nil)
        #expect(CommitCondition(models: ["c": .exists]).failure(version: 7, modelVersion: models) != nil)
        #expect(CommitCondition(models: ["c": .absent]).failure(version: 7, modelVersion: models) == nil)
        #expect(CommitCondition(models: ["b": .absent]).failure(version: 7, modelVersion: models)
            == .preconditionFailed("model 'b' exists (its tag is \"7\")", version: 7))
    }

    @Test func aStoreChecksItsConditionAgainstTheStateTheCommitAppliesToAndAppliesNothingOnFailure() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "a", value: ["n": 1])])
        try store.commit([.put(model: "b", value: ["n": 1])])
        #expect(store.model("a")?.tag == 1)
        #expect(store.model("b")?.tag == 2)
        #expect(throws: StoreError.preconditionFailed("model 'a' has the tag \"1\"", version: 2)) {
            try store.commit([.set(model: "b", keyPath: "n", value: 2)], if: CommitCondition(models: ["a": .version([2])]))
        }
        #expect(store.version == 2)
        #expect(store.model("b")?.value == ["n": 1])
        let changed = try store.commit(
            [.set(model: "a", keyPath: "n", value: 5)], if: CommitCondition(storeVersion: 2, models: ["a": .version([1])]))
        #expect(changed.version == 3)
        #expect(store.model("a")?.tag == 3)
        #expect(store.model("b")?.tag == 2)
        #expect(throws: StoreError.self) {
            try store.commit([.put(model: "a", value: [:])], if: CommitCondition(models: ["a": .absent]))
        }
        try store.commit([.put(model: "c", value: [:])], if: CommitCondition(models: ["c": .absent]))
        #expect(store.model("c")?.tag == 4)
    }

    @Test func aPatchOrDeleteMovesTheTagAndADeletedModelHasNone() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "a", value: ["n": 1]), .put(model: "b", value: ["n": 1])])
        try store.commit([.patch(model: "a", patch: ["n": 2])])
        #expect(store.model("a")?.tag == 2)
        #expect(store.model("b")?.tag == 1)
        try store.commit([.delete(model: "a")])
        #expect(store.model("a") == nil)
        try store.commit([.put(model: "a", value: ["n": 3])])
        #expect(store.model("a")?.tag == 4)
    }
}
