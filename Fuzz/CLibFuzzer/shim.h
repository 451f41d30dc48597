#ifndef RECEPTIONIST_CLIBFUZZER_SHIM_H
#define RECEPTIONIST_CLIBFUZZER_SHIM_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's entry point for a program that keeps its own main (LLVM 11 and later). Declared
// here and linked nowhere: only builds with -sanitize=fuzzer (and -DFUZZING) call it, and then
// the Swift driver links the runtime that defines it.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
