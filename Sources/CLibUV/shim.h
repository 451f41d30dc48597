#ifndef RECEPTIONIST_CLIBUV_SHIM_H
#define RECEPTIONIST_CLIBUV_SHIM_H
#include <uv.h>
#endif
