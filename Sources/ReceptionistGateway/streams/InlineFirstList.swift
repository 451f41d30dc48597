/// A short list in the order its elements were added, the first held inline and the rest in an
/// array: a list of one allocates nothing. A connection's subscriptions are kept so, since an
/// array of one would cost an idle connection 40 bytes of heap plus the allocator's overhead.
///
/// A value; the thread that owns it.
struct InlineFirstList<Element>: Sequence {
    private var first: Element?
    private var rest: [Element] = []

    var isEmpty: Bool { first == nil }
    var count: Int { first == nil ? 0 : 1 + rest.count }

    mutating func append(_ element: Element) {
        if first == nil { first = element } else { rest.append(element) }
    }

    /// Removes and returns the first element that matches, if any; the others keep their order.
    mutating func remove(where matches: (Element) -> Bool) -> Element? {
        guard let head = first else { return nil }
        if matches(head) {
            first = rest.isEmpty ? nil : rest.removeFirst()
            return head
        }
        guard let index = rest.firstIndex(where: matches) else { return nil }
        return rest.remove(at: index)
    }

    mutating func removeAll() {
        first = nil
        rest = []
    }

    func makeIterator() -> Iterator {
        Iterator(first: first, rest: rest.makeIterator())
    }

    struct Iterator: IteratorProtocol {
        fileprivate var first: Element?
        fileprivate var rest: IndexingIterator<[Element]>

        mutating func next() -> Element? {
            if let head = first {
                first = nil
                return head
            }
            return rest.next()
        }
    }
}
