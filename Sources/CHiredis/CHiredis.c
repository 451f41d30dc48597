// The one translation unit that compiles hiredis's libuv adapter: a header of static functions.
#include <uv.h>
#include <hiredis/adapters/libuv.h>
#include "CHiredis.h"

// The packaged adapter (hiredis 0.14) drops a poll callback whose status is an error, which is how
// libuv reports a refused connect or a reset socket: the context would then wait forever. This
// callback hands such an event to hiredis as the events it was waiting for, so hiredis reads the
// socket's error and reports the failure through its connect or disconnect callback.
static void receptionist_poll(uv_poll_t *handle, int status, int events) {
    redisLibuvEvents *p = (redisLibuvEvents *)handle->data;
    if (p->context == NULL) return;
    if (status != 0) events = p->events;
    if (events & UV_READABLE) redisAsyncHandleRead(p->context);
    // Reading may have freed the context (the clean-up clears p->context; p lives until uv_close ends).
    if (p->context != NULL && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->context);
}

static void receptionist_update(redisLibuvEvents *p) {
    if (p->events) {
        uv_poll_start(&p->handle, p->events, receptionist_poll);
    } else {
        uv_poll_stop(&p->handle);
    }
}

static void receptionist_add_read(void *data) {
    redisLibuvEvents *p = (redisLibuvEvents *)data;
    p->events |= UV_READABLE;
    receptionist_update(p);
}

static void receptionist_del_read(void *data) {
    redisLibuvEvents *p = (redisLibuvEvents *)data;
    p->events &= ~UV_READABLE;
    receptionist_update(p);
}

static void receptionist_add_write(void *data) {
    redisLibuvEvents *p = (redisLibuvEvents *)data;
    p->events |= UV_WRITABLE;
    receptionist_update(p);
}

static void receptionist_del_write(void *data) {
    redisLibuvEvents *p = (redisLibuvEvents *)data;
    p->events &= ~UV_WRITABLE;
    receptionist_update(p);
}

int receptionist_redis_attach(redisAsyncContext *context, void *loop) {
    int status = redisLibuvAttach(context, (uv_loop_t *)loop);
    if (status != REDIS_OK) return status;
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
