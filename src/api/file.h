/*
 * file.h - backing files (file.c): opening them (O_DIRECT), one mapping per
 * file in a cache (files.h has the table), the OFD lock that keeps
 * other processes out, a mapping's references, and what happens when the
 * last handle goes (closed.h has the rest).
 */
#ifndef PC_FILE_H
#define PC_FILE_H

#include "lib/util.h"

#include <sys/stat.h>

struct pc_cache;
struct pc_mapping;

/* Open (or share) the mapping of path; a handle's reference is taken. */
HIDDEN int file_open(struct pc_cache *c, int dirfd, const char *path, int flags, mode_t mode,
		     struct pc_mapping **out);
/* Drop a handle's reference (pc_close, after its writeback); the last
 * handle hands the file to closed.h. */
HIDDEN void file_release(struct pc_mapping *m);
/* Remove every folio, dirty or not (the file is gone, or the caller wrote
 * back what it could); waits for write-back in flight. */
HIDDEN void file_discard_all(struct pc_mapping *m);
/* Remember the file's size and times as this cache now has it (the file
 * is left alone: a reopen compares them to notice changes by others). */
HIDDEN void file_save_attrs(struct pc_mapping *m, const struct stat *st);
/* Are st's size and times those saved (nobody changed the file since)? */
HIDDEN bool file_attrs_unchanged(const struct pc_mapping *m, const struct stat *st);
/* F_OFD_SETLK on the whole file: 0, -EBUSY (held elsewhere) or -errno. */
HIDDEN int ofd_lock(int fd, short type);
/* Install the file layer's part of a mapping's teardown in c
 * (the process's mapping_teardown, which mapping_put calls): pc_cache_new, before
 * any file is opened. */
HIDDEN void file_layer_init(struct pc_cache *c);

#endif
