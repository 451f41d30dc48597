import Foundation
@testable import ReceptionistGateway
import ReceptionistWire
import Testing

@Suite final class StaticFilesTests {
    /// This test's directory, removed when it ends.
    private let base = FileManager.default.temporaryDirectory.appendingPathComponent("static-\(UUID().uuidString)")

    deinit { try? FileManager.default.removeItem(at: base) }

    /// A public directory with a nested file, a symlink inside and a symlink out.
    private func makeTree() throws -> (root: URL, files: StaticFiles) {
        let root = base.appendingPathComponent("public")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("css"), withIntermediateDirectories: true)
        try "<h1>hi</h1>".write(to: root.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        try "body{}".write(to: root.appendingPathComponent("css/site.css"), atomically: true, encoding: .utf8)
        try "secret".write(to: base.appendingPathComponent("secret.txt"), atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("out.txt"), withDestinationURL: base.appendingPathComponent("secret.txt"))
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("outdir"), withDestinationURL: base)
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("alias.css"), withDestinationURL: root.appendingPathComponent("css/site.css"))
        return (root, StaticFiles(directory: root.path))
    }

    private func get(_ files: StaticFiles, _ target: String, headers: [(String, String)] = []) -> Reply {
        var request = HTTPRequest(method: .get, target: target)
        for (name, value) in headers { request.headers.add(name, value) }
        return files.reply(for: request)
    }

    @Test func servesFilesWithTypesAndTags() throws {
        let (_, files) = try makeTree()
        let index = get(files, "/")
        #expect(index.response.status == .ok)
        #expect(index.response.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(index.sharedBody?.array == Array("<h1>hi</h1>".utf8))
        #expect(index.response.headers["Cache-Control"] == "no-cache")
        let css = get(files, "/css/site.css?v=2")
        #expect(css.response.headers["Content-Type"] == "text/css; charset=utf-8")
        #expect(get(files, "/alias.css").response.status == .ok)
        #expect(get(files, "/index.html").response.headers["ETag"] == index.response.headers["ETag"])
    }

    /// The files are read once, when `StaticFiles` is made: what happens on disk afterwards
    /// (a file rewritten in place, a file deleted, a file added) changes nothing that is served.
    /// A reply that read the file system per request would serve the new bytes, or none.
    @Test func filesAreReadOnceAndDiskChangesAfterLoadingAreNotSeen() throws {
        let (root, files) = try makeTree()
        let before = get(files, "/")
        let tag = try #require(before.response.headers["ETag"])
        #expect(before.sharedBody?.array == Array("<h1>hi</h1>".utf8))

        // Rewritten in place (same inode, a different length), deleted, and added.
        let index = try FileHandle(forWritingTo: root.appendingPathComponent("index.html"))
        try index.truncate(atOffset: 0)
        try index.write(contentsOf: Array("<h1>changed on disk</h1>".utf8))
        try index.close()
        try FileManager.default.removeItem(at: root.appendingPathComponent("css/site.css"))
        try "new".write(to: root.appendingPathComponent("new.html"), atomically: true, encoding: .utf8)
        #expect(try String(contentsOf: root.appendingPathComponent("index.html"), encoding: .utf8) == "<h1>changed on disk</h1>")

        for target in ["/", "/index.html"] {
            let after = get(files, target)
            #expect(after.response.status == .ok, "\(target)")
            #expect(after.sharedBody?.array == Array("<h1>hi</h1>".utf8), "\(target)")
            #expect(after.response.headers["ETag"] == tag, "\(target)")
        }
        for target in ["/css/site.css", "/alias.css"] {
            let css = get(files, target)
            #expect(css.response.status == .ok, "\(target)")
            #expect(css.sharedBody?.array == Array("body{}".utf8), "\(target)")
        }
        #expect(get(files, "/new.html").response.status == .notFound)
        #expect(get(files, "/", headers: [("If-None-Match", tag)]).response.status == .notModified)
    }

    @Test func ifNoneMatchAnswers304() throws {
        let (_, files) = try makeTree()
        let tag = try #require(get(files, "/").response.headers["ETag"])
        for condition in [tag, "W/\(tag)", "\"nope\", \(tag)", "*"] {
            let reply = get(files, "/", headers: [("If-None-Match", condition)])
            #expect(reply.response.status == .notModified, "\(condition)")
            #expect(reply.sharedBody == nil)
            #expect(reply.response.headers["ETag"] == tag)
        }
        #expect(get(files, "/", headers: [("If-None-Match", "\"other\"")]).response.status == .ok)
    }

    @Test(arguments: ["/../secret.txt", "/%2e%2e/secret.txt", "/css/%2E%2E/%2e%2e/secret.txt", "/a%00b", "/css%2f..%2f..%2fsecret.txt"])
    func traversalIsRefused(_ target: String) throws {
        let (_, files) = try makeTree()
        let reply = get(files, target)
        #expect(reply.response.status == .badRequest)
        #expect(reply.closesConnection)
    }

    @Test(arguments: ["/out.txt", "/outdir/secret.txt", "/missing.html"])
    func symlinksOutAreNotServed(_ target: String) throws {
        let (_, files) = try makeTree()
        #expect(get(files, target).response.status == .notFound)
    }

    /// A hidden file or directory is never served, wherever it is; `.well-known` is.
    @Test func hiddenFilesAreNotServedButWellKnownIs() throws {
        let root = base.appendingPathComponent("hidden")
        let manager = FileManager.default
        for directory in [".git", "css/.cache", ".well-known"] {
            try manager.createDirectory(at: root.appendingPathComponent(directory), withIntermediateDirectories: true)
        }
        for (name, text) in [
            (".env", "SECRET=1"), (".git/config", "[core]"), ("css/.cache/x.css", "x{}"), ("css/.site.css.swp", "swap"),
            ("css/site.css", "body{}"), (".well-known/security.txt", "Contact: x"),
        ] {
            try text.write(to: root.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let files = StaticFiles(directory: root.path)
        for target in ["/.env", "/.git/config", "/css/.cache/x.css", "/css/.site.css.swp"] {
            #expect(get(files, target).response.status == .notFound, "\(target)")
        }
        #expect(get(files, "/css/site.css").sharedBody?.array == Array("body{}".utf8))
        #expect(get(files, "/.well-known/security.txt").sharedBody?.array == Array("Contact: x".utf8))
        #expect(files.skipped.isEmpty)
    }

    @Test func contentTypes() {
        #expect(ContentType.forPath("a/b.js") == "text/javascript; charset=utf-8")
        #expect(ContentType.forPath("x.PNG") == "image/png")
        #expect(ContentType.forPath("noext") == "application/octet-stream")
        #expect(ContentType.forPath("dir.d/file") == "application/octet-stream")
    }
}
