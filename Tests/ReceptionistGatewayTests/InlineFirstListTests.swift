@testable import ReceptionistGateway
import Testing

@Suite struct InlineFirstListTests {
    @Test func keepsTheOrderThroughAppendsAndRemovals() {
        var list = InlineFirstList<Int>()
        #expect(list.isEmpty && Array(list).isEmpty)
        for n in 1...4 { list.append(n) }
        #expect(Array(list) == [1, 2, 3, 4] && list.count == 4)
        #expect(list.remove(where: { $0 == 1 }) == 1)  // the inline one: the next takes its place
        #expect(Array(list) == [2, 3, 4])
        #expect(list.remove(where: { $0 == 3 }) == 3)
        #expect(list.remove(where: { $0 == 9 }) == nil)
        #expect(Array(list) == [2, 4])
        list.append(5)
        #expect(Array(list) == [2, 4, 5] && list.contains(4))
        list.removeAll()
        #expect(list.isEmpty && Array(list).isEmpty)
    }

    @Test func aListOfOneRemovedIsEmpty() {
        var list = InlineFirstList<String>()
        list.append("a")
        #expect(list.remove(where: { $0 == "a" }) == "a")
        #expect(list.isEmpty && list.count == 0)
        #expect(list.remove(where: { _ in true }) == nil)
    }
}
