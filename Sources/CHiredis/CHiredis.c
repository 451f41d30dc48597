// The one translation unit that compiles hiredis's libuv adapter: a header of static functions.
#include <uv.h>
#include <hiredis/adapters/libuv.h>
#include "CHiredis.h"

// The packaged adapter (hiredis 0.14) drops a poll callback whose status is an error, which is how
// libuv reports a refused connect or a reset socket: the context would then wait forever. This
// callback hands such an event to hiredis as the events it was waiting for, so hiredis reads the
// socket's error and reports the failure through its connect or disconnect callback.
// Set while this thread's loop writes a context's buffer itself (`receptionist_redis_flush`, or
// the socket became writable). A connected context's commands are written together at the end of
// the loop iteration that queued them; only when the socket does not take them all does the
// context poll for writability. Otherwise hiredis would start and stop that poll around every
// command, and libuv re-registers the descriptor with epoll each time: two system calls a command.
static _Thread_local int receptionist_writing = 0;

static void receptionist_handle_write(redisAsyncContext *context) {
    receptionist_writing = 1;
    redisAsyncHandleWrite(context);
    receptionist_writing = 0;
}

static void receptionist_poll(uv_poll_t *handle, int status, int events) {
    redisLibuvEvents *p = (redisLibuvEvents *)handle->data;
    if (p->context == NULL) return;
    if (status != 0) {
        // libuv stopped the poll before it called back with the error: forget the events it had,
        // so that hiredis's next addRead (after a reply read with the error) starts it again. Kept,
        // addRead saw reading on already, and the socket was never watched again.
        events = p->events;
        p->events = 0;
    }
    if (events & UV_READABLE) redisAsyncHandleRead(p->context);
    // Reading may have freed the context (the clean-up clears p->context; p lives until uv_close ends).
    if (p->context != NULL && (events & UV_WRITABLE)) receptionist_handle_write(p->context);
}

void receptionist_redis_flush(redisAsyncContext *context) {
    receptionist_handle_write(context);
}

static void receptionist_update(redisLibuvEvents *p) {
    if (p->events) {
        uv_poll_start(&p->handle, p->events, receptionist_poll);
    } else {
        uv_poll_stop(&p->handle);
    }
}

// Each of these changes the poll only when the events change: hiredis asks for reading after
// every reply.
static void receptionist_add_read(void *data) {
    redisLibuvEvents *p = (redisLibuvEvents *)data;
    if (p->events & UV_READABLE) return;
    p->events |= UV_READABLE;
    receptionist_update(p);
}

static void receptionist_del_read(void *data) {
    redisLibuvEvents *p = (redisLibuvEvents *)data;
    if (!(p->events & UV_READABLE)) return;
    p->events &= ~UV_READABLE;
    receptionist_update(p);
}

static void receptionist_add_write(void *data) {
    redisLibuvEvents *p = (redisLibuvEvents *)data;
    // A connected context's new command: written at the end of this iteration, see above.
    if (!receptionist_writing && p->context != NULL && (p->context->c.flags & REDIS_CONNECTED)) return;
    if (p->events & UV_WRITABLE) return;
    p->events |= UV_WRITABLE;
    receptionist_update(p);
}

static void receptionist_del_write(void *data) {
    redisLibuvEvents *p = (redisLibuvEvents *)data;
    if (!(p->events & UV_WRITABLE)) return;
    p->events &= ~UV_WRITABLE;
    receptionist_update(p);
}

int receptionist_redis_attach(redisAsyncContext *context, void *loop) {
    int status = redisLibuvAttach(context, (uv_loop_t *)loop);
    if (status != REDIS_OK) return status;
    receptionist_redis_use_reply_blocks(context->c.reader);
    context->ev.addRead = receptionist_add_read;
    context->ev.delRead = receptionist_del_read;
    context->ev.addWrite = receptionist_add_write;
    context->ev.delWrite = receptionist_del_write;
    return REDIS_OK;
}

int receptionist_redis_is_attached(const redisAsyncContext *context) {
    return context->ev.data != NULL;
}

const char *receptionist_redis_errstr(const redisAsyncContext *context) {
    return context->errstr;
}
