import CSQLite

/// A failure SQLite reported: its result code and message.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String

    /// The disk (or the file size limit) is full.
    public var isFull: Bool { code & 0xff == SQLITE_FULL || (code & 0xff == SQLITE_IOERR && message.contains("write")) }
    /// The file is not a database, or is damaged.
    public var isCorrupt: Bool { code & 0xff == SQLITE_CORRUPT || code & 0xff == SQLITE_NOTADB }

    public var description: String { "\(message) (SQLite code \(code))" }
}

/// One SQLite connection: the only code that calls SQLite (the one importer of `CSQLite`).
///
/// One thread at a time: the disk engine opens it on the starting thread, loads from it, then
/// hands it to its writer thread for good.
final class SQLiteDatabase {
    private var handle: OpaquePointer?

    init(path: String) throws(SQLiteError) {
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open \(path)"
            sqlite3_close(db)
            throw SQLiteError(code: status, message: message)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    var isOpen: Bool { handle != nil }

    /// Finalizes every statement (a statement left open would keep the connection, and its locks,
    /// alive past the close) and closes the connection. Statements used after it fail.
    func close() {
        guard let handle else { return }
        while let statement = sqlite3_next_stmt(handle, nil) { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
        self.handle = nil
    }

    /// Runs one or more statements that return no rows.
    func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &message)
        guard status == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? lastError.message
            sqlite3_free(message)
            throw SQLiteError(code: status, message: text)
        }
    }

    func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else { throw SQLiteError(code: status, message: lastError.message) }
        return SQLiteStatement(statement, database: self)
    }

    /// The first column of the first row of `sql` as an integer, or nil without a row.
    func integer(_ sql: String) throws(SQLiteError) -> Int64? {
        let statement = try prepare(sql)
        return try statement.step() ? statement.int64(0) : nil
    }

    /// The first column of the first row of `sql` as text, or nil without a row.
    func text(_ sql: String) throws(SQLiteError) -> String? {
        let statement = try prepare(sql)
        return try statement.step() ? statement.text(0) : nil
    }

    var lastError: SQLiteError {
        SQLiteError(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)))
    }

    /// Copies the write-ahead log into the database and syncs both: what `--fsync interval`
    /// runs at its interval. A reader in the way only delays it (PASSIVE).
    func checkpoint() throws(SQLiteError) {
        let status = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        guard status == SQLITE_OK else { throw lastError }
    }
}

/// A prepared statement, bound and stepped; reset before each use.
final class SQLiteStatement {
    private let statement: OpaquePointer
    /// Held strongly: the connection outlives its statements, and says whether they are finalized.
    private let database: SQLiteDatabase

    init(_ statement: OpaquePointer, database: SQLiteDatabase) {
        self.statement = statement
        self.database = database
    }

    deinit {
        if database.isOpen { sqlite3_finalize(statement) }
    }

    /// Clears the bindings and the last run, for the next.
    func reset() {
        guard database.isOpen else { return }
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(statement, index, value)
    }

    func bind(_ index: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                _ = receptionist_sqlite_bind_text(statement, index, chars.baseAddress, Int32(chars.count))
            }
        }
    }

    func bind(_ index: Int32, blob: [UInt8]) {
        blob.withUnsafeBytes { bind(index, blob: $0) }
    }

    /// Binds a copy of `bytes` (SQLite copies them before this returns).
    func bind(_ index: Int32, blob bytes: UnsafeRawBufferPointer) {
        // An empty blob is still a blob, not NULL: SQLite takes a non-null pointer for it.
        _ = receptionist_sqlite_bind_blob(statement, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count))
    }

    func bindNull(_ index: Int32) {
        sqlite3_bind_null(statement, index)
    }

    /// Runs to the next row: true with a row, false when done.
    @discardableResult
    func step() throws(SQLiteError) -> Bool {
        guard database.isOpen else { throw SQLiteError(code: SQLITE_MISUSE, message: "the database is closed") }
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw database.lastError
        }
    }

    /// Runs a statement that returns no rows, then resets it.
    func run() throws(SQLiteError) {
        defer { reset() }
        try step()
    }

    /// Binds `bytes` at `index` in place (no copy, for a large blob) and runs the statement; the
    /// reset before this returns drops the binding, so SQLite never reads the bytes after.
    func run(binding index: Int32, blob bytes: UnsafeRawBufferPointer) throws(SQLiteError) {
        defer { reset() }
        _ = receptionist_sqlite_bind_blob_in_place(
            statement, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count))
        try step()
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(statement, column)
    }

    func text(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(statement, column) else { return "" }
        return String(cString: text)
    }

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(statement, column) == SQLITE_NULL
    }

    /// The column's bytes, read in place: valid only inside `body`.
    func withBlob<R>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard let base = sqlite3_column_blob(statement, column) else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    func blob(_ column: Int32) -> [UInt8] {
        withBlob(column) { Array($0) }
    }
}
