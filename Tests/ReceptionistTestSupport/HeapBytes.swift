/// glibc's `malloc_usable_size`, which its Swift module does not export.
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer?) -> Int

/// The bytes malloc gave `object`: its size class, what it really costs on the heap (glibc adds
/// a word of its own to each). The footprint tests hold each per-connection object to its class.
public func heapBytes(of object: AnyObject) -> Int {
    mallocUsableSize(Unmanaged.passUnretained(object).toOpaque())
}
