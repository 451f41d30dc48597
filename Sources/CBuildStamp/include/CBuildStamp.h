#ifndef RECEPTIONIST_BUILD_STAMP_H
#define RECEPTIONIST_BUILD_STAMP_H

/// The git commit the binary was built from, 40 hexadecimal digits, or 40 '?' when the binary
/// was not stamped (built outside a git work tree, or by `swift build` alone).
const char *receptionist_build_commit(void);

#endif
