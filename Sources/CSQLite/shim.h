#ifndef RECEPTIONIST_CSQLITE_SHIM_H
#define RECEPTIONIST_CSQLITE_SHIM_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift cannot import: these
// wrappers bind a copy of the bytes, so the caller's buffer may go right after the call.
static inline int receptionist_sqlite_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int count) {
    return sqlite3_bind_blob(statement, index, bytes, count, SQLITE_TRANSIENT);
}

static inline int receptionist_sqlite_bind_text(sqlite3_stmt *statement, int index, const char *text, int count) {
    return sqlite3_bind_text(statement, index, text, count, SQLITE_TRANSIENT);
}

// Binds `bytes` without a copy (SQLITE_STATIC): the caller keeps them until the statement is
// reset, which `SQLiteStatement.run(binding:blob:)` does before it returns.
static inline int receptionist_sqlite_bind_blob_in_place(sqlite3_stmt *statement, int index, const void *bytes, int count) {
    return sqlite3_bind_blob(statement, index, bytes, count, SQLITE_STATIC);
}
#endif
