#include "CBuildStamp.h"

// A marker and 40 placeholder characters, which `scripts/stamp-commit.py` overwrites in the
// linked binary with the commit it was built from. Stamping after the link keeps the commit out
// of every compiler and linker command, so a new commit never rebuilds anything. `volatile`
// keeps the compiler from folding the placeholder into its readers; `used` keeps it linked.
__attribute__((used)) static volatile const char stamp[] =
    "RECEPTIONIST-BUILD-COMMIT:????????????????????????????????????????";

const char *receptionist_build_commit(void) {
    return (const char *)stamp + sizeof("RECEPTIONIST-BUILD-COMMIT:") - 1;
}
