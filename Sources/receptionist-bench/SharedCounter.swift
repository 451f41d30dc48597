import Glibc

/// One 64-bit count in a file mapped by several processes: a subscriber process writes how many
/// messages its subscribers have been delivered, and the publisher reads every such file to pace
/// itself by how far the subscribers have got (`SubscriberPace`).
///
/// An aligned 8-byte store or load is one instruction on the machines we run on, so a reader sees
/// either the old count or the new one; a count read a little late only makes the publisher wait
/// one tick longer.
///
/// One thread per process.
final class SharedCounter {
    private let pointer: UnsafeMutableRawPointer

    /// Maps `path`, creating it holding 0 when `create` (a subscriber process), or as it is.
    init(path: String, create: Bool) throws {
        let descriptor = open(path, create ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY, 0o644)
        guard descriptor >= 0 else { throw SharedCounterError(path: path, call: "open", code: errno) }
        defer { close(descriptor) }
        if create, ftruncate(descriptor, 8) != 0 {
            throw SharedCounterError(path: path, call: "ftruncate", code: errno)
        }
        let mapped = mmap(nil, 8, create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, descriptor, 0)
        guard let mapped, mapped != MAP_FAILED else { throw SharedCounterError(path: path, call: "mmap", code: errno) }
        pointer = mapped
    }

    deinit {
        munmap(pointer, 8)
    }

    var value: UInt64 {
        get { pointer.load(as: UInt64.self) }
        set { pointer.storeBytes(of: newValue, as: UInt64.self) }
    }
}

struct SharedCounterError: Error, CustomStringConvertible {
    let path: String
    let call: String
    let code: Int32
    var description: String { "\(call) \(path): \(String(cString: strerror(code)))" }
}
