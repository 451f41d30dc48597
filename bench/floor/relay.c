/*
 * The floor of the cluster bench: the least an HTTP publish endpoint can do, with and without a
 * round trip to Redis before it answers. It reads keep-alive HTTP/1.1 requests (a head and a
 * Content-Length body), and answers each with 200 and "{}", in order: at once, or, given a Redis
 * port, once Redis has answered an INCR sent for that request (one connection, pipelined, so
 * answers come back in request order). No parsing beyond framing, no JSON, no log, no fan-out:
 * what it reaches bounds what any gateway that stores a publish in Redis before acknowledging it
 * can reach on the same machine and workload.
 *
 * Usage: relay PORT [REDIS_PORT]
 */
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
static redisAsyncContext *redis;

typedef struct {
    uv_tcp_t tcp;
    char *input;
    size_t length, capacity;
    int owed; /* requests sent to Redis, not yet answered */
    int closing, closed;
} client;

/* Freed once closed and owed nothing by Redis. */
static void release(client *c) {
    if (!c->closed || c->owed) return;
    free(c->input);
    free(c);
}

static void freed(uv_handle_t *handle) {
    client *c = (client *)handle;
    c->closed = 1;
    release(c);
}

static void drop(client *c) {
    if (c->closing) return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->tcp, freed);
}

/* Writes `count` answers in one call; a loopback socket this lightly loaded takes them whole. */
static void reply(client *c, int count) {
    char buffer[64 * sizeof answer];
    size_t size = 0;
    while (count > 0) {
        int now = count < 64 ? count : 64;
        for (int i = 0; i < now; i++) { memcpy(buffer + size, answer, sizeof answer - 1); size += sizeof answer - 1; }
        uv_buf_t buf = uv_buf_init(buffer, (unsigned)size);
        if (uv_try_write((uv_stream_t *)&c->tcp, &buf, 1) != (int)size) { drop(c); return; }
        count -= now;
        size = 0;
    }
}

static void stored(redisAsyncContext *context, void *result, void *data) {
    (void)context;
    client *c = data;
    c->owed--;
    if (c->closing) { release(c); return; }
    if (!result || ((redisReply *)result)->type == REDIS_REPLY_ERROR) { drop(c); return; }
    reply(c, 1);
}

/* How many whole requests the input holds; they are removed from it. */
static int take_requests(client *c) {
    int count = 0;
    size_t start = 0;
    for (;;) {
        char *head = c->input + start;
        size_t left = c->length - start;
        char *end = memmem(head, left, "\r\n\r\n", 4);
        if (!end) break;
        size_t body = 0;
        for (char *line = head; line && line < end;) {
            if (strncasecmp(line, "content-length:", 15) == 0) body = strtoul(line + 15, NULL, 10);
            char *next = memchr(line, '\n', (size_t)(end - line));
            line = next ? next + 1 : NULL;
        }
        size_t total = (size_t)(end - head) + 4 + body;
        if (total > left) break;
        start += total;
        count++;
    }
    memmove(c->input, c->input + start, c->length - start);
    c->length -= start;
    return count;
}

/* A client's unread input is bounded: past 1 MiB without a whole request, it is dropped. */
#define RELAY_MAX_INPUT (1 << 20)

static void allocate(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    client *c = (client *)handle;
    (void)suggested;
    if (c->length >= RELAY_MAX_INPUT) { *buf = uv_buf_init(NULL, 0); return; }
    if (c->capacity - c->length < 65536) {
        c->capacity = c->length + 65536;
        c->input = realloc(c->input, c->capacity);
    }
    *buf = uv_buf_init(c->input + c->length, (unsigned)(c->capacity - c->length));
}

static void readable(uv_stream_t *stream, ssize_t read, const uv_buf_t *buf) {
    client *c = (client *)stream;
    (void)buf;
    if (read < 0) { drop(c); return; } /* UV_ENOBUFS too, past the bound */
    c->length += (size_t)read;
    int count = take_requests(c);
    if (!redis) { reply(c, count); return; }
    for (int i = 0; i < count; i++) {
        c->owed++;
        redisAsyncCommand(redis, stored, c, "INCR floor");
    }
}

static void accepted(uv_stream_t *server, int status) {
    if (status < 0) return;
    client *c = calloc(1, sizeof *c);
    uv_tcp_init(server->loop, &c->tcp);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) { uv_close((uv_handle_t *)&c->tcp, freed); return; }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, allocate, readable);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    uv_loop_t *loop = uv_default_loop();
    if (argc > 2) {
        redis = redisAsyncConnect("127.0.0.1", atoi(argv[2]));
        if (!redis || redis->err) return 1;
        redisLibuvAttach(redis, loop);
    }
    uv_tcp_t server;
    struct sockaddr_in address;
    uv_ip4_addr("127.0.0.1", atoi(argv[1]), &address);
    uv_tcp_init(loop, &server);
    if (uv_tcp_bind(&server, (const struct sockaddr *)&address, 0) != 0) return 1;
    if (uv_listen((uv_stream_t *)&server, 128, accepted) != 0) return 1;
    return uv_run(loop, UV_RUN_DEFAULT);
}
