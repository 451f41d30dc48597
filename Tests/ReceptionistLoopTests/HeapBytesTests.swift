import ReceptionistTestSupport
import Testing

/// The footprint tests' measure: a class's malloc size class, the same on every heap.
@Suite struct HeapBytesTests {
    /// 16 bytes of object header and 13 words: a request of 120, the largest in the class of 128.
    private final class ThirteenWords {
        var words: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    }

    /// One word more than fits: the next class.
    private final class FourteenWords {
        var words: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    }

    private final class Empty {}

    @Test func theInstanceSizeIsReadFromTheClassMetadata() {
        #expect(instanceSize(of: ThirteenWords()) == 120)
        #expect(instanceSize(of: FourteenWords()) == 128)
        #expect(instanceSize(of: Empty()) == 16)
    }

    /// Every instance of a class measures the same, whichever chunk malloc handed it.
    @Test func aClassMeasuresItsSizeClassOnAnyHeap() {
        var objects: [AnyObject] = []
        for _ in 0..<64 {
            // Free chunks of other sizes between the allocations, for malloc to hand out whole.
            objects.append(ThirteenWords())
            objects.append(FourteenWords())
        }
        objects.removeAll { $0 is FourteenWords }
        for _ in 0..<64 {
            let object = ThirteenWords()
            #expect(heapBytes(of: object) == 120)
        }
        #expect(heapBytes(of: FourteenWords()) == 136)
        #expect(heapBytes(of: Empty()) == 24)
        withExtendedLifetime(objects) {}
    }
}
