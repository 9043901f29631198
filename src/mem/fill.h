/*
 * fill.h - bringing blocks of a locked folio uptodate synchronously
 * (fill.c): reading blocks that hold no valid data, and merging device
 * data around a deferred partial write.  Below both the read path and
 * writeback (which merges a partial block before writing it), so neither
 * calls the other.
 */
#ifndef PC_FILL_H
#define PC_FILL_H

#include "lib/util.h"

struct pc_folio;
struct pc_mapping;

/* Bring blocks overlapping [off, off+len) of a locked folio uptodate,
 * merging device data around deferred partial writes. */
HIDDEN int fill_range(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len);
/* Read block-aligned [off, off+len) of the file into buf (aligned for
 * direct I/O) with one device read; past the written data: zeros, no I/O. */
HIDDEN int fill_read_blocks(struct pc_mapping *m, uint8_t *buf, uint64_t off, size_t len);
/* Merge device data into the folio's partly written blocks only (the
 * flusher, before writing them back). */
HIDDEN int fill_merge_partials(struct pc_mapping *m, struct pc_folio *f);

#endif
