/*
 * valkey_library.h - the leased_v1 function library's source text, compiled
 * in from leased.lua (CMakeLists.txt generates its definition), so the
 * adapter loads exactly the library it was built and tested with.
 */
#ifndef LEASE_VALKEY_LIBRARY_H
#define LEASE_VALKEY_LIBRARY_H

/* NUL-terminated Lua source, "#!lua name=leased_v1" first. */
extern const unsigned char lease_valkey_library[];

#define LEASE_VALKEY_LIBRARY_NAME "leased_v1"

#endif
