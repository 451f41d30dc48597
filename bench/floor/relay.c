/*
 * The floor of the cluster bench: the least an HTTP publish endpoint can do, with and without a
 * round trip to Redis before it answers. It reads keep-alive HTTP/1.1 requests (a head and a
 * Content-Length body), and answers each with 200 and "{}", in order: at once, or, given a Redis
 * port, once Redis has answered an INCR sent for that request (one connection, pipelined, so
 * answers come back in request order). No parsing beyond framing, no JSON, no log, no fan-out:
 * what it reaches bounds what any gateway that stores a publish in Redis before acknowledging it
 * can reach on the same machine and workload.
 *
 * With `log`, each message is kept as a gateway keeps it: the requests read in one loop iteration
 * go to Redis in one script call (at most 256 a call), which numbers them (INCRBY) and appends each
 * body with its number to a stream (XADD, the last one trimming it), as one step. That is the
 * least a gateway does that numbers and logs every message atomically, so that a subscriber can
 * resume from a number; still no JSON, no epoch, no notice and no fan-out.
 *
 * Usage: relay PORT [REDIS_PORT [log]]
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
static int logging;

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

static void keep(client *c, const char *body, size_t length);

/* How many whole requests the input holds; they are removed from it (their bodies kept first, when
 * logging). */
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
        if (logging) keep(c, end + 4, body);
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
    if (logging) return; /* kept: sent at the iteration's end */
    for (int i = 0; i < count; i++) {
        c->owed++;
        redisAsyncCommand(redis, stored, c, "INCR floor");
    }
}

/* Logging: the requests read in one loop iteration, sent as one script call at its end. */
#define LOG_BATCH 256
static const char log_script[] =
    "local n = #ARGV\n"
    "local last = redis.call('INCRBY', KEYS[1], n)\n"
    "for i = 1, n - 1 do\n"
    "  redis.call('XADD', KEYS[2], '*', 's', last - n + i, 'd', ARGV[i])\n"
    "end\n"
    "redis.call('XADD', KEYS[2], 'MAXLEN', '~', 10000, '*', 's', last, 'd', ARGV[n])\n"
    "return last\n";
static char log_sha[41];

typedef struct {
    int messages, groups;
    const char *argv[5 + LOG_BATCH];
    size_t lengths[5 + LOG_BATCH];
    char *bodies[LOG_BATCH];
    struct { client *c; int count; } owed[LOG_BATCH]; /* runs of one client's requests, in order */
} batch;
static batch *pending;

static void logged(redisAsyncContext *context, void *result, void *data) {
    (void)context;
    batch *b = data;
    int failed = !result || ((redisReply *)result)->type == REDIS_REPLY_ERROR;
    for (int g = 0; g < b->groups; g++) {
        client *c = b->owed[g].c;
        c->owed -= b->owed[g].count;
        if (c->closing) continue;
        if (failed) drop(c); else reply(c, b->owed[g].count);
    }
    /* A client is released after its last run in the batch, never before. */
    for (int g = 0; g < b->groups; g++) {
        int later = 0;
        for (int h = g + 1; h < b->groups && !later; h++) later = b->owed[h].c == b->owed[g].c;
        if (!later && b->owed[g].c->closing) release(b->owed[g].c);
    }
    for (int i = 0; i < b->messages; i++) free(b->bodies[i]);
    free(b);
}

static void send_pending(void) {
    batch *b = pending;
    pending = NULL;
    if (!b) return;
    const char *fixed[5] = {"EVALSHA", log_sha, "2", "floor:seq", "floor:log"};
    for (int i = 0; i < 5; i++) { b->argv[i] = fixed[i]; b->lengths[i] = strlen(fixed[i]); }
    for (int i = 0; i < b->messages; i++) b->argv[5 + i] = b->bodies[i];
    redisAsyncCommandArgv(redis, logged, b, 5 + b->messages, b->argv, b->lengths);
}

static void iteration_end(uv_check_t *handle) {
    (void)handle;
    send_pending();
}

static void keep(client *c, const char *body, size_t length) {
    if (pending && pending->messages == LOG_BATCH) send_pending();
    if (!pending) pending = calloc(1, sizeof *pending);
    batch *b = pending;
    char *copy = malloc(length ? length : 1);
    memcpy(copy, body, length);
    b->bodies[b->messages] = copy;
    b->lengths[5 + b->messages] = length;
    b->messages++;
    if (b->groups > 0 && b->owed[b->groups - 1].c == c) {
        b->owed[b->groups - 1].count++;
    } else {
        b->owed[b->groups].c = c;
        b->owed[b->groups].count = 1;
        b->groups++;
    }
    c->owed++;
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
        if (argc > 3 && strcmp(argv[3], "log") == 0) {
            redisContext *setup = redisConnect("127.0.0.1", atoi(argv[2]));
            redisReply *sha = setup && !setup->err ? redisCommand(setup, "SCRIPT LOAD %s", log_script) : NULL;
            if (!sha || sha->type != REDIS_REPLY_STRING || sha->len != 40) return 1;
            memcpy(log_sha, sha->str, 40);
            freeReplyObject(sha);
            redisFree(setup);
            logging = 1;
            static uv_check_t end;
            uv_check_init(loop, &end);
            uv_check_start(&end, iteration_end);
        }
    }
    uv_tcp_t server;
    struct sockaddr_in address;
    uv_ip4_addr("127.0.0.1", atoi(argv[1]), &address);
    uv_tcp_init(loop, &server);
    if (uv_tcp_bind(&server, (const struct sockaddr *)&address, 0) != 0) return 1;
    if (uv_listen((uv_stream_t *)&server, 128, accepted) != 0) return 1;
    return uv_run(loop, UV_RUN_DEFAULT);
}
