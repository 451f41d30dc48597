/// glibc's `malloc_usable_size`, which its Swift module does not export.
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer?) -> Int

/// The bytes malloc gives every instance of `object`'s class: its size class, what one really
/// costs on the heap. The footprint tests hold each per-connection object to its class.
///
/// `malloc_usable_size` of the one object is not that figure: glibc may hand a request a free
/// chunk up to 16 bytes larger rather than split off a remainder too small to keep, so the same
/// class measures 120 on one heap and 136 on another. The class is worked out from the instance
/// size the Swift runtime allocates, read from the class metadata, with glibc's rule for a chunk:
/// the request plus its one word of header, rounded up to 16, less that word, and never under 24.
public func heapBytes(of object: AnyObject) -> Int {
    let requested = instanceSize(of: object)
    let sizeClass = max(24, (requested + 8 + 15) / 16 * 16 - 8)
    // The chunk this object got is never smaller than its class: a check on the metadata read.
    precondition(mallocUsableSize(Unmanaged.passUnretained(object).toOpaque()) >= sizeClass)
    return sizeClass
}

/// The instance size the runtime passes to malloc for a native Swift class. Without Objective-C
/// interop (Linux), class metadata is: kind or isa, superclass, 32-bit flags, 32-bit instance
/// address point, then the 32-bit instance size at byte 24.
public func instanceSize(of object: AnyObject) -> Int {
    let metadata = unsafeBitCast(type(of: object), to: UnsafeRawPointer.self)
    return Int(metadata.load(fromByteOffset: 24, as: UInt32.self))
}
