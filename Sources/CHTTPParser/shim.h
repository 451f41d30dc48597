#ifndef RECEPTIONIST_CHTTPPARSER_SHIM_H
#define RECEPTIONIST_CHTTPPARSER_SHIM_H
#include <http_parser.h>

/* The parser's fields are C bit-fields; these accessors keep Swift away from their layout. */
static inline unsigned int chp_errno(const http_parser *p) { return p->http_errno; }
static inline unsigned int chp_method(const http_parser *p) { return p->method; }
static inline unsigned int chp_upgrade(const http_parser *p) { return p->upgrade; }
static inline unsigned int chp_flags(const http_parser *p) { return p->flags; }
#endif
