#ifndef RECEPTIONIST_CHIREDIS_H
#define RECEPTIONIST_CHIREDIS_H
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

/// Attaches `context` to the libuv loop `loop` (a `uv_loop_t *`) through hiredis's libuv adapter,
/// whose functions are static and so cannot be called from Swift directly. The loop is passed as
/// a plain pointer so that this header does not bring libuv's types into a second Swift module.
/// Returns REDIS_OK or REDIS_ERR. Call on the loop's thread.
int receptionist_redis_attach(redisAsyncContext *context, void *loop);

/// Whether `receptionist_redis_attach` got as far as creating the poll handle, so that
/// `redisAsyncFree` may run the adapter's clean-up.
int receptionist_redis_is_attached(const redisAsyncContext *context);

/// The context's error text (a fixed-size array, awkward to reach from Swift).
const char *receptionist_redis_errstr(const redisAsyncContext *context);

/// Writes what the context has queued; if the socket does not take it all, the context polls for
/// writability and writes the rest then. A connected context's commands wait for this call.
void receptionist_redis_flush(redisAsyncContext *context);

/// Makes `reader` build each reply in a few blocks that its root owns (`ReplyBlocks.c`), not two
/// allocations an element. Such a reply is freed only whole, by the reader, as hiredis does.
void receptionist_redis_use_reply_blocks(redisReader *reader);

/// A reader that builds replies so, for tests; free with `redisReaderFree`.
redisReader *receptionist_reply_reader_create(void);

/// How many allocations this thread's replies hold now (roots and their further blocks).
long receptionist_reply_allocations_live(void);

#endif
