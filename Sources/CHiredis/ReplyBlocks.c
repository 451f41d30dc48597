// hiredis's reply-object functions, replaced so that a reply is built in a few blocks of memory
// instead of two allocations per element (a `redisReply` and its string or element array, by
// hiredis's own functions). A stream read of one message is some fifteen elements: thirty
// mallocs and frees, about a fifth of what a node that follows a topic spends on each message.
//
// The replies keep hiredis's own layout (`redisReply`), so everything that reads them is
// unchanged. Only where they live differs:
//  - the root of each reply is allocated with a header in front of it, and with room after it
//    (for an array) where its elements are laid out in turn;
//  - an element is bump-allocated from its root's room; when that is full, a further block is
//    chained to the root's header, each twice the last (up to 1 MiB, or as big as one element);
//  - freeing the root frees them all.
// This holds because hiredis frees only roots: after the callback that was handed the reply, and
// when the reader fails part-way through one (the root it has built so far). Its own creating
// functions, which we replace, are the only code in the library that frees an element alone.
// So a reply must never be freed element by element, and never kept past its callback (a
// `RedisReplyView` is valid only during it).
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "CHiredis.h"

// A further block of a reply, chained to the root's header; its room follows it.
typedef struct receptionist_reply_block {
    struct receptionist_reply_block *next;
    size_t size;
} receptionist_reply_block;

// What precedes a reply's root: the blocks it owns beyond the first, and where the free room is.
typedef struct {
    receptionist_reply_block *blocks;
    size_t last_size;
    char *cursor;
    char *end;
} receptionist_reply_header;

typedef struct {
    receptionist_reply_header header;
    redisReply reply;
} receptionist_reply_root;

// The first allocation of an array's reply: its header, root and room, 1 KiB in all, which holds
// a pub/sub message or a script's answer; a further block starts at as much again. glibc's
// per-thread cache serves allocations up to about 1 KiB without locking or merging chunks: a
// 4 KiB first allocation cost more to allocate and free than a stream read saved.
#define RECEPTIONIST_REPLY_FIRST 1024
#define RECEPTIONIST_REPLY_BLOCK_MAX (1 << 20)

static _Thread_local long receptionist_reply_allocations = 0;

long receptionist_reply_allocations_live(void) {
    return receptionist_reply_allocations;
}

static size_t receptionist_align(size_t n) {
    return (n + 7) & ~(size_t)7;
}

static void *receptionist_reply_malloc(size_t n) {
    void *memory = malloc(n);
    if (memory != NULL) receptionist_reply_allocations += 1;
    return memory;
}

static void receptionist_reply_free(void *memory) {
    free(memory);
    receptionist_reply_allocations -= 1;
}

// The root's header, found from any task of its reply: the root task has no parent, and its
// object is the root (set before any of its elements is read).
static receptionist_reply_header *receptionist_header_of(const redisReadTask *task) {
    while (task->parent != NULL) task = task->parent;
    return &((receptionist_reply_root *)((char *)task->obj - offsetof(receptionist_reply_root, reply)))->header;
}

// `n` bytes, 8-aligned, from the root's room, chaining a further block when it is full.
static void *receptionist_take(receptionist_reply_header *header, size_t n) {
    n = receptionist_align(n);
    if ((size_t)(header->end - header->cursor) < n) {
        size_t size = header->last_size * 2 - sizeof(receptionist_reply_block);
        if (size > RECEPTIONIST_REPLY_BLOCK_MAX) size = RECEPTIONIST_REPLY_BLOCK_MAX;
        if (size < n) size = n;
        receptionist_reply_block *block = receptionist_reply_malloc(sizeof(receptionist_reply_block) + size);
        if (block == NULL) return NULL;
        block->next = header->blocks;
        block->size = size;
        header->blocks = block;
        header->last_size = size + sizeof(receptionist_reply_block);
        header->cursor = (char *)(block + 1);
        header->end = header->cursor + size;
    }
    void *memory = header->cursor;
    header->cursor += n;
    return memory;
}

// A reply of `type` with `extra` bytes after it (for its string or elements): a root of its own
// allocation, with `room` more for its elements' when it is an array, or an element taken from
// its root's room and set in its parent.
static redisReply *receptionist_create(const redisReadTask *task, int type, size_t extra, size_t room) {
    redisReply *reply;
    if (task->parent == NULL) {
        size_t size = receptionist_align(sizeof(receptionist_reply_root) + extra);
        receptionist_reply_root *root = receptionist_reply_malloc(size + room);
        if (root == NULL) return NULL;
        root->header.blocks = NULL;
        root->header.last_size = RECEPTIONIST_REPLY_FIRST / 2;
        root->header.cursor = (char *)root + size;
        root->header.end = root->header.cursor + room;
        reply = &root->reply;
    } else {
        reply = receptionist_take(receptionist_header_of(task), sizeof(redisReply) + extra);
        if (reply == NULL) return NULL;
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = reply;
    }
    memset(reply, 0, sizeof(redisReply));
    reply->type = type;
    return reply;
}

static void *receptionist_create_string(const redisReadTask *task, char *str, size_t len) {
    redisReply *reply = receptionist_create(task, task->type, len + 1, 0);
    if (reply == NULL) return NULL;
    reply->str = (char *)(reply + 1);
    memcpy(reply->str, str, len);
    reply->str[len] = '\0';
    reply->len = len;
    return reply;
}

static void *receptionist_create_array(const redisReadTask *task, int elements) {
    size_t pointers = (size_t)(elements > 0 ? elements : 0) * sizeof(redisReply *);
    size_t first = receptionist_align(sizeof(receptionist_reply_root) + pointers);
    size_t room = first < RECEPTIONIST_REPLY_FIRST ? RECEPTIONIST_REPLY_FIRST - first : 0;
    redisReply *reply = receptionist_create(task, REDIS_REPLY_ARRAY, pointers, room);
    if (reply == NULL) return NULL;
    reply->elements = (size_t)(elements > 0 ? elements : 0);
    reply->element = (redisReply **)(reply + 1);
    memset(reply->element, 0, pointers);
    return reply;
}

static void *receptionist_create_integer(const redisReadTask *task, long long value) {
    redisReply *reply = receptionist_create(task, REDIS_REPLY_INTEGER, 0, 0);
    if (reply != NULL) reply->integer = value;
    return reply;
}

static void *receptionist_create_nil(const redisReadTask *task) {
    return receptionist_create(task, REDIS_REPLY_NIL, 0, 0);
}

// Frees a root and every block of its reply.
static void receptionist_free_reply(void *object) {
    if (object == NULL) return;
    receptionist_reply_root *root = (receptionist_reply_root *)((char *)object - offsetof(receptionist_reply_root, reply));
    receptionist_reply_block *block = root->header.blocks;
    while (block != NULL) {
        receptionist_reply_block *next = block->next;
        receptionist_reply_free(block);
        block = next;
    }
    receptionist_reply_free(root);
}

static redisReplyObjectFunctions receptionist_reply_functions = {
    receptionist_create_string,
    receptionist_create_array,
    receptionist_create_integer,
    receptionist_create_nil,
    receptionist_free_reply,
};

void receptionist_redis_use_reply_blocks(redisReader *reader) {
    reader->fn = &receptionist_reply_functions;
}

redisReader *receptionist_reply_reader_create(void) {
    return redisReaderCreateWithFunctions(&receptionist_reply_functions);
}
