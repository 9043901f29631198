/*
 * file_slots.h - a file's slot in the cache, and the process's
 * descriptors of it at that slot (file_slots.c).
 *
 * A mapping is shared by every process of a shared cache; the backing
 * file's descriptors are not (each process opens the file itself), so
 * they live in the process's part of the cache (struct pc_proc's file
 * table, struct pc_file_procs in mapping.h), found by the file's slot:
 * mproc(m).  The slots are a bitmap in the cache; the table is in chunks
 * the process makes on first use and frees at the cache's end.
 */
#ifndef PC_FILE_SLOTS_H
#define PC_FILE_SLOTS_H

#include "lib/util.h"

#include <stdbool.h>

struct pc_cache;
struct pc_mapping;
struct pc_proc;

/* Give m (m->c set) a slot, and this process an entry for it with no
 * descriptor (fd and old_fd -1, everything else false): 0, -ENFILE
 * (FILE_SLOTS files held at once), or -ENOMEM. */
HIDDEN int file_slot_get(struct pc_mapping *m);
/* A shared cache: this process is to hold m's descriptor (from another
 * process): its entry at m's slot becomes m's, with no descriptor yet.
 * 0 or -ENOMEM. */
HIDDEN int file_entry_claim(struct pc_mapping *m);
/* The fdpass server's lookup (api/shared.c): a new descriptor of this
 * process's entry at `slot` if the entry is for the file of generation
 * `gen`, else -ENOENT. */
HIDDEN int file_fd_dup(struct pc_cache *c, uint32_t slot, uint32_t gen);
/* Close this process's descriptors of m (fd and old_fd, those it has):
 * m stays without one. */
HIDDEN void file_descriptors_close(struct pc_mapping *m);
/* A shared cache's holders (mapping.h, holders): does this process hold
 * m's descriptor; does another? */
HIDDEN bool file_held_here(const struct pc_mapping *m);
HIDDEN bool file_held_by_others(const struct pc_mapping *m);
/* This process holds m's descriptor now (its entry has it): its bit, and
 * a reference for it. */
HIDDEN void file_hold(struct pc_mapping *m);
/* It lets go (if it held m): its descriptors closed, its entry emptied,
 * its bit cleared and its reference put (which may free m). */
HIDDEN void file_unhold(struct pc_mapping *m);
/* m is gone: its slot is free again. */
HIDDEN void file_slot_put(struct pc_mapping *m);
/* The cache's end (or a fork child's copy of it): free the process's
 * table (its descriptors are closed or not the caller's). */
HIDDEN void file_procs_free(struct pc_proc *p);

#endif
