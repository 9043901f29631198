/*
 * read_hit.c - the test hook of the cache hit, whose code is inline in
 * read_hit.h (see there) so that pc_pread serves a hit as one function.
 */
#include "read_hit.h"

#include "mapping.h"
#include "util.h"

HIDDEN void (*read_hit_test_before_copy)(struct pc_mapping *m, uint64_t off);
