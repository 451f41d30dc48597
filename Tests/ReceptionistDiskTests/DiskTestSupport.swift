import Glibc

/// A fresh directory under the system's temporary folder.
func temporaryDirectory() -> String {
    var template = Array("/tmp/receptionist-disk-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
}
