/*
 * pagecache_sqlite.h - SQLite's I/O through pagecache: the VFS "pagecache".
 *
 * The VFS is in libpagecache_sqlite.so, which is also a loadable SQLite
 * extension (sqlite3_load_extension, the CLI's .load).  A program that
 * links it registers the VFS itself with sqlite3_pagecache_register() and
 * opens databases with the URI parameter vfs=pagecache, or makes it the
 * default.  See pagecache_sqlite(3).
 */
#ifndef PAGECACHE_SQLITE_H
#define PAGECACHE_SQLITE_H

#include <pagecache.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Register the VFS "pagecache" with the SQLite the program links.  cfg
 * (may be NULL: pc_config_init's defaults) is the base of the one cache
 * the process makes at its first open; URI parameters and environment
 * variables change it (pagecache_sqlite(3) says which wins).  make_default
 * != 0 makes it SQLite's default VFS.  Returns SQLITE_OK, SQLITE_MISUSE
 * (called again with another cfg once the cache exists: it is not
 * changed), or what sqlite3_vfs_register returns. */
PC_API int sqlite3_pagecache_register(const struct pc_config *cfg, int make_default);

#ifdef __cplusplus
}
#endif
#endif /* PAGECACHE_SQLITE_H */
