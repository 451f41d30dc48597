#ifndef RECEPTIONIST_CZLIB_SHIM_H
#define RECEPTIONIST_CZLIB_SHIM_H
#include <zlib.h>

// deflateInit2 and inflateInit2 are macros that pass the library's version and the stream's
// size; Swift cannot call a macro, so these wrappers do it.
static inline int receptionist_deflate_init(z_stream *stream, int level, int window_bits) {
    return deflateInit2(stream, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
}

static inline int receptionist_inflate_init(z_stream *stream, int window_bits) {
    return inflateInit2(stream, window_bits);
}
#endif
