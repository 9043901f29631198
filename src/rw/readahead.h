/*
 * readahead.h - read-ahead that follows streams through the cache, not
 * through handles (readahead.c): marks on folios carrying the window's
 * size, the context before a miss, and a per-handle hint; the fadvise
 * modes.
 */
#ifndef PC_READAHEAD_H
#define PC_READAHEAD_H

#include "lib/util.h"

struct pc_file;
struct pc_folio;

/* A handle's fadvise mode (pc_file.ra_advice). */
enum { PC_RA_NORMAL, PC_RA_SEQUENTIAL, PC_RA_RANDOM };
/* Whether a read of [off, off+len) through h is a stream's, by the hint
 * (it also records this read): it starts where one of the handle's recent
 * reads that came to the read path ended, or at 0; for an uncached read
 * (dontcache), where a read that was itself a continuation or at 0 ended.
 * *continues: it starts at a recent read's end. */
HIDDEN bool readahead_hinted(struct pc_file *h, uint64_t off, size_t len, bool dontcache, bool *continues);
/* A read through h reached folio f, which carries a read-ahead mark: take
 * the mark and issue the stream's next window, without waiting for it.
 * Whether the read continues a stream (false: h does no read-ahead, and
 * the mark stays). */
HIDDEN bool readahead_reached(struct pc_file *h, struct pc_folio *f, unsigned rf);
/* A read through h missed at pos (wanting up to end): read what it needs,
 * with a window ahead if it is part of a stream (*stream in: the hint
 * says so; out: whether it is).  *f: the folio at pos, referenced (NULL:
 * look again); *read_to: how far the caller's own read was issued. */
HIDDEN int readahead_miss(struct pc_file *h, uint64_t pos, uint64_t end, unsigned rf, bool *stream,
			  struct pc_folio **f, uint64_t *read_to);

#endif
