import Glibc
@testable import ReceptionistDisk
import ReceptionistJSON
@testable import ReceptionistModel
import ReceptionistSync
import Testing

@Suite struct DiskEngineTests {
    @Test func storesAndTopicsComeBackAsTheyWereStored() throws {
        let directory = temporaryDirectory()
        let epoch: String
        do {
            let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
            #expect(contents.stores.isEmpty && contents.topics.isEmpty && !contents.newEpochs)
            let stores = StoreRegistry(historyLimit: 100, journal: engine)
            let store = try stores.create("orders")
            epoch = store.epoch
            try store.commit([.put(model: "o1", value: ["n": 1, "text": "é \u{1F600}"]), .put(model: "o2", value: ["n": 2])])
            try store.commit([.set(model: "o1", keyPath: "n", value: 5)])
            try store.commit([.delete(model: "o2")])
            #expect(append(engine, "news", seq: 1) == .stored)
            #expect(append(engine, "news", seq: 2) == .stored)
            engine.close()
        }
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
        defer { engine.close() }
        #expect(contents.stores.count == 1)
        let store = try #require(contents.stores.first)
        #expect(store.name == "orders" && store.version == 3 && store.epoch == epoch)
        #expect(store.models.map(\.id) == ["o1"])
        #expect(store.models.first?.value == ["n": 5, "text": "é \u{1F600}"])
        #expect(store.models.first?.tag == 2)
        #expect(store.history.map(\.version) == [1, 2, 3])
        #expect(store.history[1].changes == [ModelChange(model: "o1", keyPath: "n", oldValue: 1, newValue: 5)])
        let topic = try #require(contents.topics.first)
        #expect(topic.name == "news" && topic.seq == 2 && topic.epoch == "e1")
        #expect(topic.messages.map(\.seq) == [1, 2])
        #expect(topic.messages.last?.data == Array("{\"n\":2}".utf8))
        #expect(topic.messages.last?.publishedAt == 1002)
    }

    @Test func aSecondEngineOnTheSameDirectoryIsRefused() throws {
        let directory = temporaryDirectory()
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
        #expect(throws: DiskError.self) { try DiskEngine.open(DiskOptions(directory: directory)) }
        engine.close()
        let (again, _) = try DiskEngine.open(DiskOptions(directory: directory))
        again.close()
    }

    @Test func aFileThatIsNotOursIsRefused() throws {
        let garbage = temporaryDirectory()
        let file = fopen(garbage + "/receptionist.sqlite3", "w")!
        fputs(String(repeating: "not a database ", count: 500), file)
        fclose(file)
        #expect(throws: DiskError.self) { try DiskEngine.open(DiskOptions(directory: garbage)) }

        let foreign = temporaryDirectory()
        let db = try SQLiteDatabase(path: foreign + "/receptionist.sqlite3")
        try db.execute("CREATE TABLE other(x); INSERT INTO other VALUES (1);")
        db.close()
        #expect(throws: DiskError.self) { try DiskEngine.open(DiskOptions(directory: foreign)) }
    }

    /// A Receptionist data file (our application id) of a format this gateway does not read: a
    /// newer one, and an older one than the format it brings forward (2). Each has the current
    /// tables, so only its format number is wrong; the open is refused with the format named,
    /// and the file is left as it was.
    @Test func aDataFileOfAnotherFormatIsRefused() throws {
        for format in [DiskSchema.version + 1, 1] {
            let directory = temporaryDirectory()
            let path = directory + "/" + DiskSchema.fileName
            let db = try SQLiteDatabase(path: path)
            try db.execute("PRAGMA application_id = \(DiskSchema.applicationID); PRAGMA user_version = \(format);")
            try db.execute(DiskSchema.tables)
            try db.execute("INSERT INTO stores(name, epoch, version, models_version) VALUES ('s', 'e', 0, 0);")
            db.close()
            let error = #expect(throws: DiskError.self) { try DiskEngine.open(DiskOptions(directory: directory)) }
            #expect(error?.description == "\(path) has data format \(format); this gateway reads format \(DiskSchema.version)")
            let after = try SQLiteDatabase(path: path)
            defer { after.close() }
            #expect(try after.integer("PRAGMA user_version") == format)
            #expect(try after.text("PRAGMA journal_mode") == "delete")
            #expect(try after.integer("SELECT count(*) FROM stores") == 1)
        }
    }

    /// A negative version or sequence number can only be damage: the open is refused with the
    /// row named, where converting it trapped and the process died without saying why.
    @Test func aNegativeNumberInTheFileIsRefusedAsDamage() throws {
        for row in ["INSERT INTO stores(name, epoch, version, models_version) VALUES ('s', 'e', -1, -1)",
                    "INSERT INTO topics(name, epoch, seq) VALUES ('t', 'e', -5)"] {
            let directory = temporaryDirectory()
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            engine.close()
            let db = try SQLiteDatabase(path: directory + "/" + DiskSchema.fileName)
            try db.execute(row)
            db.close()
            let error = #expect(throws: DiskError.self) { try DiskEngine.open(DiskOptions(directory: directory)) }
            #expect(error?.description.contains("is damaged (a negative number)") == true, "\(String(describing: error))")
        }
    }

    /// A kept message whose data is not JSON (empty, cut short) is refused as damage at the open,
    /// where it was served as stored, inside every replay's frames, as text no client could read.
    @Test func aMessageThatIsNotJSONIsRefusedAsDamage() throws {
        for data in ["x''", "CAST('{\"a\":' AS BLOB)"] {
            let directory = temporaryDirectory()
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            #expect(append(engine, "t", seq: 1) == .stored)
            engine.close()
            let db = try SQLiteDatabase(path: directory + "/" + DiskSchema.fileName)
            try db.execute("UPDATE messages SET data = \(data)")
            db.close()
            let error = #expect(throws: DiskError.self) { try DiskEngine.open(DiskOptions(directory: directory)) }
            #expect(error?.description.contains("message 1 of topic 't' is damaged") == true, "\(String(describing: error))")
        }
    }

    @Test func aTopicNumberThatDoesNotFollowOnIsRefused() throws {
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: temporaryDirectory()))
        defer { engine.close() }
        // Refused, and said so by the writer: a time-out or a full queue is not a refusal.
        #expect(append(engine, "t", seq: 2) == .refused(.storageFailed("message 2 of 't' does not follow the stored number 0")))
        #expect(append(engine, "t", seq: 1) == .stored)
        #expect(append(engine, "t", seq: 1) == .refused(.storageFailed("message 1 of 't' does not follow the stored number 1")))
        #expect(append(engine, "t", seq: 2) == .stored)
    }

    /// A topic the gateway forgot (`--topic-ttl`) leaves the directory; message 1 of a new epoch
    /// starts the name over even where the forgetting was not stored, and the next start finds
    /// only the new life.
    @Test func aForgottenTopicGoesAndMessageOneOfANewEpochStartsItsNameOver() throws {
        let directory = temporaryDirectory()
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            for seq: UInt64 in 1...3 {
                #expect(append(engine, "gone", seq: seq) == .stored)
                #expect(append(engine, "renewed", seq: seq) == .stored)
            }
            #expect(engine.forgetTopic("gone"))
            #expect(append(engine, "renewed", seq: 1, epoch: "e2") == .stored)
            #expect(append(engine, "renewed", seq: 2, epoch: "e2") == .stored)
            engine.close()
        }
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
        defer { engine.close() }
        #expect(contents.topics.map(\.name) == ["renewed"])
        let renewed = try #require(contents.topics.first)
        #expect(renewed.epoch == "e2" && renewed.seq == 2 && renewed.messages.map(\.seq) == [1, 2])
        #expect(append(engine, "gone", seq: 1) == .stored, "the name starts over")
    }

    /// A store's record handed to the writer with a version that is not the store's next: one
    /// past a gap, and one repeating the version stored. Neither is stored, each is counted as a
    /// refused write, and the writer still waits for the next version, which the store's own
    /// commit then brings.
    @Test func aChangeSetThatIsNotItsStoresNextVersionIsRefused() throws {
        let directory = temporaryDirectory()
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            let store = try StoreRegistry(journal: engine).create("s")
            try store.commit([.put(model: "m", value: ["n": 1])])
            let generation = store.journalSnapshot(changedAfter: 0).generation
            let refusedBefore = refusedWrites(engine)
            for version: UInt64 in [3, 1] {
                let changeSet = ChangeSet(
                    store: "s", version: version, committedAtMicroseconds: 1,
                    changes: [ModelChange(model: "m", keyPath: "n", oldValue: 1, newValue: 99)])
                engine.append(JournalRecord(changeSet: changeSet, generation: generation), of: store)
            }
            try #require(caughtUp(engine, mark: 1), "the writer did not answer")
            #expect(refusedWrites(engine) - refusedBefore == 2)
            let next = try store.commit([.set(model: "m", keyPath: "n", value: 2)])
            #expect(next.version == 2)
            engine.close()
        }
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
        engine.close()
        let store = try #require(contents.stores.first)
        #expect(store.version == 2)
        #expect(store.history.map(\.version) == [1, 2])
        #expect(store.history.last?.changes == [ModelChange(model: "m", keyPath: "n", oldValue: 1, newValue: 2)])
        #expect(store.models.map(\.value) == [["n": 2]])
    }

    /// A store deleted and made again under its name while a holder of the old object still
    /// commits to it: the old object's change set, though it carries the very version the new
    /// store is to store next, is refused (`noSuchStore`) and undone, and the new store's own
    /// next commit is stored at that version.
    @Test func aChangeSetOfAStoreObjectNoLongerLiveUnderItsNameIsRefused() throws {
        let directory = temporaryDirectory()
        let liveEpoch: String
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            let stores = StoreRegistry(journal: engine)
            let dead = try stores.create("s")
            try dead.commit([.put(model: "old", value: ["n": 1])])
            try stores.delete("s")
            let live = try stores.create("s")
            liveEpoch = live.epoch
            try live.commit([.put(model: "new", value: ["n": 1])])
            // `dead`'s next version is 2, which is `live`'s next too: only the object tells them apart.
            #expect(outcome(of: commitLater(dead, [.put(model: "stale", value: ["n": 2])])) == .refused(.noSuchStore("s")))
            #expect(dead.version == 1 && dead.snapshot().models["stale"] == nil)
            let next = try live.commit([.put(model: "newer", value: ["n": 2])])
            #expect(next.version == 2)
            engine.close()
        }
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
        engine.close()
        let store = try #require(contents.stores.first)
        #expect(contents.stores.count == 1)
        #expect(store.epoch == liveEpoch && store.version == 2)
        #expect(store.models.map(\.id).sorted() == ["new", "newer"])
        #expect(store.history.map(\.version) == [1, 2])
        #expect(store.history.flatMap(\.changes).map(\.model) == ["new", "newer"])
    }

    /// A store's change set still queued when the store undid its unsettled change sets (as it
    /// does when the journal fails a write) belongs to a generation undone since: the writer
    /// drops it, counted as refused, and stores the change set committed after the undo at the
    /// same version.
    @Test func aChangeSetOfAGenerationUndoneSinceIsRefused() throws {
        let directory = temporaryDirectory()
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            let store = try StoreRegistry(journal: engine).create("s")
            try store.commit([.put(model: "a", value: ["n": 1])])
            let generation = store.journalSnapshot(changedAfter: 0).generation
            engine.holdWriter(true)
            let undone = commitLater(store, [.put(model: "b", value: ["n": 2])])
            // What the writer answers a failed transaction: every unsettled change set is undone
            // and answered, and the generation moves on, while `b`'s record is still queued.
            store.unsettle(generation: generation, because: .storageFailed("the disk is full"))
            #expect(outcome(of: undone) == .refused(.storageFailed("the disk is full")))
            #expect(store.journalSnapshot(changedAfter: 0).generation == generation + 1)
            let redone = commitLater(store, [.put(model: "c", value: ["n": 2])])
            let refusedBefore = refusedWrites(engine)
            engine.holdWriter(false)
            #expect(outcome(of: redone) == .stored)
            #expect(refusedWrites(engine) - refusedBefore == 1)
            #expect(store.version == 2)
            engine.close()
        }
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
        engine.close()
        let store = try #require(contents.stores.first)
        #expect(store.version == 2)
        #expect(store.models.map(\.id).sorted() == ["a", "c"])
        #expect(store.history.map(\.version) == [1, 2])
        #expect(store.history.last?.changes.map(\.model) == ["c"])
    }

    @Test func oldChangeSetsAreCompactedToTheRetainedCount() throws {
        let directory = temporaryDirectory()
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory, retain: 300))
            let store = try StoreRegistry(historyLimit: 300, journal: engine).create("s")
            try store.commit([.put(model: "m", value: ["n": 0])])
            for n in 1..<1000 { try store.commit([.set(model: "m", keyPath: "n", value: .number(JSONNumber(n)))]) }
            engine.close()
        }
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory, retain: 300))
        engine.close()
        let store = try #require(contents.stores.first)
        #expect(store.version == 1000)
        #expect(store.history.count == 300)
        #expect(store.history.first?.version == 701)
        let db = try SQLiteDatabase(path: directory + "/receptionist.sqlite3")
        defer { db.close() }
        // Compaction runs every 256 versions: at most that many more than retained stay on disk.
        let kept = try db.integer("SELECT sum(last - first + 1) FROM change_sets") ?? 0
        #expect(kept >= 300 && kept < 300 + Int64(DiskWriter.compactEvery))
    }

    @Test func aBatchOfLargeChangeSetsIsStoredInBoundedRowsAndComesBackWhole() throws {
        let directory = temporaryDirectory()
        // Six change sets of ~400 KB each, held back so that they make one batch: 2.4 MB.
        let text = { (n: Int) in String(repeating: Character(Unicode.Scalar(UInt8(97 + n))), count: 400_000) }
        do {
            let (engine, _) = try DiskEngine.open(DiskOptions(directory: directory))
            let store = try StoreRegistry(historyLimit: 100, journal: engine).create("big")
            let answered = ConditionLock(0)
            engine.holdWriter(true)
            for n in 0..<6 {
                store.commit([.put(model: "m\(n % 2)", value: ["text": .string(text(n))])]) { result in
                    #expect((try? result.get()) != nil)
                    answered.withLock { $0 += 1 }
                    answered.broadcast()
                }
            }
            engine.holdWriter(false)
            #expect(answered.wait(seconds: 10, until: { $0 == 6 }, then: { _, done in done }))
            engine.close()
        }
        let db = try SQLiteDatabase(path: directory + "/receptionist.sqlite3")
        // No row grows with the batch: a row is closed once it passes `rowBytes`.
        let rows = try db.integer("SELECT count(*) FROM change_sets") ?? 0
        let largest = try db.integer("SELECT max(length(entries)) FROM change_sets") ?? 0
        let sets = try db.integer("SELECT sum(last - first + 1) FROM change_sets") ?? 0
        db.close()
        #expect(rows >= 2 && sets == 6)
        #expect(largest < Int64(DiskWriter.rowBytes + 2 * 400_000 + 4096))
        let (engine, contents) = try DiskEngine.open(DiskOptions(directory: directory))
        engine.close()
        let store = try #require(contents.stores.first)
        #expect(store.version == 6)
        #expect(store.history.map(\.version) == [1, 2, 3, 4, 5, 6])
        let models = Dictionary(uniqueKeysWithValues: store.models.map { ($0.id, $0.value) })
        #expect(models["m0"] == ["text": .string(text(4))])
        #expect(models["m1"] == ["text": .string(text(5))])
    }
}
