/*
 * vfs.h - what the files of the pagecache VFS share (sqlite/).
 *
 * One concern per file:
 *   api.c       the SQLite calls the VFS makes: through the extension's
 *               routines when loaded, else the linked library's
 *   settings.c  URI parameters and environment variables, and which wins
 *   cache.c     the process's one cache, made at the first open
 *   locks.c     SQLite's lock levels among the connections of a process
 *   errors.c    errno to SQLITE_IOERR_* codes, the last errno
 *   io.c        the methods of an open file: read, write, sync, size, ...
 *   fcntl.c     xFileControl: PRAGMA pagecache_stats and the rest
 *   vfs.c       the sqlite3_vfs: open, delete, the calls passed to the
 *               default VFS; sqlite3_pagecache_register
 *   extension.c the loadable extension's entry point
 *
 * Every file but api.c includes sqlite3ext.h, so its sqlite3_* calls go
 * through the routines SQLite gave the extension (SQLITE_EXTENSION_INIT3).
 */
#ifndef PAGECACHE_SQLITE_VFS_H
#define PAGECACHE_SQLITE_VFS_H

/* sqlite3ext.h's calls go through `sqlite3_api`; ours has a name of its
 * own, so that a program with an extension of its own linked in (its
 * own sqlite3_api) can link the static library too. */
#define sqlite3_api pcs_sqlite3_api
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pagecache.h"

#if defined(__GNUC__)
#define PCS_HIDDEN __attribute__((visibility("hidden")))
#else
#define PCS_HIDDEN
#endif

#define PCS_VFS_NAME "pagecache"

/* ------------------------------------------------------------- api.c */

/* Point sqlite3_api at the routines of the SQLite linked with the
 * library, unless an extension load set it already. */
PCS_HIDDEN void pcs_api_use_linked(void);
/* sqlite3_api is set (by a load or by pcs_api_use_linked). */
PCS_HIDDEN bool pcs_api_ready(void);

/* -------------------------------------------------------- settings.c */

/* What a connection's file asks of the cache: URI parameters over
 * environment variables over the registered configuration. */
struct pcs_settings {
	uint64_t memory;     /* memory_limit; 0: as the base configuration */
	uint64_t block;      /* block_size; 0: as the base configuration */
	bool uncached;       /* PC_DONTCACHE on the file's reads and writes */
	bool memory_set, block_set, uncached_set;
};
/* The settings for a file opened by the name SQLite gave xOpen (a main
 * database, journal or WAL name: sqlite3_uri_* work on all three).  0, or
 * SQLITE_MISUSE with *bad naming the parameter that does not parse. */
PCS_HIDDEN int pcs_settings_for(const char *zName, struct pcs_settings *s, const char **bad);
/* "256M", "1G", "4096", "64k": bytes, or -1. */
PCS_HIDDEN int64_t pcs_parse_size(const char *s);

/* ----------------------------------------------------------- cache.c */

/* The process's cache, made with `s` applied to the base configuration
 * at the first call (and again in a child of fork, which cannot use its
 * parent's).  NULL with errno set. */
PCS_HIDDEN struct pc_cache *pcs_cache_get(const struct pcs_settings *s);
/* The base configuration (sqlite3_pagecache_register's cfg): 0, or
 * SQLITE_MISUSE if the cache exists already. */
PCS_HIDDEN int pcs_cache_set_base(const struct pc_config *cfg);
/* The memory_limit of this process's cache, 0 if none. */
PCS_HIDDEN uint64_t pcs_cache_memory(void);
/* The cache if it was made in this process, else NULL (for stats). */
PCS_HIDDEN struct pc_cache *pcs_cache_current(void);

/* ----------------------------------------------------------- locks.c */

/* The lock state SQLite's connections of one process share for one file
 * (dev, ino), as the unix VFS's unixInodeInfo without the POSIX locks:
 * pagecache's OFD lock keeps other processes out of the file. */
struct pcs_inode;
/* The state of (dev, ino), made or found, with a reference.  NULL: ENOMEM. */
PCS_HIDDEN struct pcs_inode *pcs_inode_get(dev_t dev, ino_t ino);
PCS_HIDDEN void pcs_inode_put(struct pcs_inode *in);
/* Raise *held to `want` (SQLITE_LOCK_*): SQLITE_OK or SQLITE_BUSY. */
PCS_HIDDEN int pcs_lock(struct pcs_inode *in, int *held, int want);
/* No other open file of the process is this one. */
PCS_HIDDEN bool pcs_inode_alone(struct pcs_inode *in);
/* Lower *held to `want` (SQLITE_LOCK_SHARED or SQLITE_LOCK_NONE). */
PCS_HIDDEN void pcs_unlock(struct pcs_inode *in, int *held, int want);
/* Some connection holds RESERVED or more. */
PCS_HIDDEN bool pcs_reserved(struct pcs_inode *in);

/* ---------------------------------------------------------- errors.c */

/* Remember errno `e` for xGetLastError and return `code`, unless e is an
 * errno that has a code of its own (ENOSPC, EDQUOT: SQLITE_FULL; ENOMEM:
 * SQLITE_IOERR_NOMEM; EBUSY: SQLITE_BUSY). */
PCS_HIDDEN int pcs_ioerr(int code, int e);
/* xGetLastError: the errno of this thread's last failed call. */
PCS_HIDDEN int pcs_last_error(sqlite3_vfs *vfs, int nbuf, char *buf);

/* -------------------------------------------------------------- io.c */

/* An open file of the VFS.  Files of other kinds (temporary files, super
 * journals) are the default VFS's, opened in the same memory. */
struct pcs_file {
	sqlite3_file base;          /* pMethods: pcs_io_methods */
	struct pc_file *f;
	struct pcs_inode *inode;
	char *path;                 /* for HAS_MOVED and the directory sync */
	dev_t dev;
	ino_t ino;
	int kind;                   /* SQLITE_OPEN_MAIN_DB, _MAIN_JOURNAL, _WAL */
	int lock;                   /* SQLITE_LOCK_* this connection holds */
	int rw_flags;               /* PC_* flags of reads and writes */
	int sector_size;            /* xSectorSize: the cache's block size */
	struct pc_file *random;     /* pc_uncached=1 main database: cached reads (io.c) */
	bool psow;                  /* claim SQLITE_IOCAP_POWERSAFE_OVERWRITE */
	bool persist_wal;           /* SQLITE_FCNTL_PERSIST_WAL */
	bool dirsync;               /* created: sync the directory at the first sync */
	bool readonly;
	bool around;                /* read-around on a miss (read_around, io.c) */
	uint64_t next_read;         /* where the last read ended */
	char *scratch;              /* read-around's bytes around the page */
};
PCS_HIDDEN extern const sqlite3_io_methods pcs_io_methods;

/* ------------------------------------------------------------- vfs.c */

/* Register the VFS (sqlite3_api set): cfg as for
 * sqlite3_pagecache_register. */
PCS_HIDDEN int pcs_register(const struct pc_config *cfg, int make_default);

/* ----------------------------------------------------------- fcntl.c */

PCS_HIDDEN int pcs_file_control(sqlite3_file *file, int op, void *arg);

#endif /* PAGECACHE_SQLITE_VFS_H */
