/*
 * internal.h - every internal header at once, for the tests that reach
 * into the library's internals; all but read_hit.h, the cache hit inline
 * for api.c (tests/test_mt_hits.c declares its hook itself).
 *
 * The library's own sources do not include it: each .c file of src/
 * includes the headers of what it uses, and each header is one concern
 * and declares the calls of the .c file of its name (handle.h: api.c's;
 * cache.h has struct pc_cache only).  docs/design.md has the map and
 * which layer may call which; scripts/include-graph.py checks that the
 * include graph has no cycle and that no source of the library includes
 * this file.
 */
#ifndef PC_INTERNAL_H
#define PC_INTERNAL_H

#include "util.h"

#include "backend.h"
#include "counter.h"
#include "fault.h"
#include "io_fd.h"
#include "progress.h"
#include "radix.h"
#include "sysmem.h"

#include "block_state.h"
#include "folio.h"
#include "written.h"

#include "arena.h"
#include "cache.h"
#include "flusher.h"
#include "handle.h"
#include "mapping.h"

#include "backing.h"
#include "dirty.h"
#include "edges.h"
#include "errseq.h"
#include "fill.h"
#include "fs_sync.h"
#include "pace.h"
#include "reclaim.h"
#include "throttle.h"
#include "writeback.h"

#include "closed.h"
#include "direct.h"
#include "file.h"
#include "process.h"
#include "read.h"
#include "read_io.h"
#include "readahead.h"
#include "span.h"
#include "truncate.h"
#include "write.h"

#endif
