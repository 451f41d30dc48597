#ifndef RECEPTIONIST_CLIBUV_SHIM_H
#define RECEPTIONIST_CLIBUV_SHIM_H
#include <uv.h>
#include <sys/socket.h>

/* glibc declares accept4 only under _GNU_SOURCE. The loop takes each accepted socket
   non-blocking and close-on-exec in the one call. */
int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
#endif
