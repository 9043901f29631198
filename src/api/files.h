/*
 * files.h - the cache's table of files (files.c): one mapping per backing
 * file by device and inode, under cache->files_lock.
 */
#ifndef PC_FILES_H
#define PC_FILES_H

#include "lib/util.h"

struct pc_cache;
struct pc_mapping;

/* The mapping of (dev, ino), or NULL; files_lock held, no reference taken. */
HIDDEN struct pc_mapping *files_hash_find(struct pc_cache *c, dev_t dev, ino_t ino);
/* Add a new mapping (files_lock held): the table's reference is the
 * mapping's first. */
HIDDEN void files_hash_insert(struct pc_cache *c, struct pc_mapping *m);
/* Take m out of the index (files_lock held); the index's reference is
 * the caller's to drop. */
HIDDEN void files_hash_remove(struct pc_cache *c, struct pc_mapping *m);
/* pc_cache_destroy: write back every mapping (the first error), then,
 * once no I/O is in flight, free them all. */
HIDDEN int files_writeback_all(struct pc_cache *c);
/* Every mapping of the cache, with a reference each (the caller puts
 * them and frees the array): their number; *out NULL when none. */
HIDDEN unsigned files_snapshot(struct pc_cache *c, struct pc_mapping ***out);
/* Write m back as the last who can: its data, an unseen write error,
 * its end through the kernel, its reservations given back.  0 or the
 * first error. */
HIDDEN int files_writeback_last(struct pc_mapping *m);
HIDDEN void files_free_all(struct pc_cache *c);

#endif
