/*
 * internal.h - every internal header at once, for the tests that reach
 * into the library's internals; all but read_hit.h, the cache hit inline
 * for api.c (tests/test_mt_hits.c declares its hook itself).
 *
 * The library's own sources do not include it: each .c file of src/
 * includes the headers of what it uses, and each header is one concern
 * and declares the calls of the .c file of its name (handle.h: api.c's;
 * cache.h has struct pc_cache, its hooks and cache_inherited).
 * docs/design.md has the map and which layer may call which;
 * scripts/layers.py (the `layers` test) checks the calls on the object
 * files' symbols, and that no source of the library includes this file.
 */
#ifndef PC_INTERNAL_H
#define PC_INTERNAL_H

#include "lib/util.h"

#include "io/backend.h"
#include "lib/counter.h"
#include "lib/forkgen.h"
#include "io/fault.h"
#include "api/fault_rules.h"
#include "io/io_fd.h"
#include "lib/progress.h"
#include "lib/radix.h"
#include "lib/shlock.h"
#include "lib/slots.h"
#include "lib/sysmem.h"

#include "mem/block_state.h"
#include "mem/folio.h"
#include "lib/written.h"

#include "mem/arena.h"
#include "api/cache.h"
#include "wb/flusher.h"
#include "api/files.h"
#include "api/handle.h"
#include "mem/mapping.h"

#include "wb/backing.h"
#include "wb/dirty.h"
#include "wb/edges.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "mem/fill.h"
#include "io/fs_sync.h"
#include "wb/pace.h"
#include "mem/reclaim.h"
#include "mem/segment.h"
#include "wb/throttle.h"
#include "wb/writeback.h"

#include "api/closed.h"
#include "rw/direct.h"
#include "api/file.h"
#include "api/process.h"
#include "rw/read.h"
#include "rw/read_io.h"
#include "rw/readahead.h"
#include "rw/span.h"
#include "rw/truncate.h"
#include "rw/write.h"

#endif
