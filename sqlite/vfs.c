/*
 * vfs.c - the VFS "pagecache": which files go through the cache, opening
 * them, and the calls it leaves to the default VFS.
 *
 * The main database, its rollback journal and its WAL go through the
 * process's cache (cache.c), with the flags that fit each: a journal is
 * written once, synced, and read back only to roll back, so its reads and
 * writes are uncached (PC_DONTCACHE); a database and its WAL are cached,
 * unless the connection asks for pc_uncached.  Temporary databases and
 * journals, statement journals and super-journals are the default VFS's:
 * the first are private to a connection and gone after it (the kernel's
 * page cache serves them without a device write), and a super-journal is
 * a few names written once.  Names, access checks, time, randomness and
 * dynamic loading are the default VFS's too.
 */
#include "vfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static sqlite3_vfs *base_vfs(sqlite3_vfs *vfs)
{
	return vfs->pAppData;
}

#define KIND_MASK                                                                                    \
	(SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TRANSIENT_DB | SQLITE_OPEN_MAIN_JOURNAL |  \
	 SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_SUBJOURNAL | SQLITE_OPEN_SUPER_JOURNAL | SQLITE_OPEN_WAL)

/* The kinds of file that go through the cache (xOpen's flags hold one). */
static bool through_cache(const char *zName, int kind)
{
	return zName && (kind == SQLITE_OPEN_MAIN_DB || kind == SQLITE_OPEN_MAIN_JOURNAL || kind == SQLITE_OPEN_WAL);
}

/* A journal or WAL gets its database's permissions (as the unix VFS
 * gives them), a new database 0644 less the umask. */
static mode_t mode_for(const char *zName, int kind)
{
	static const char *const suffixes[] = { "-journal", "-wal" };
	const char *suffix = suffixes[kind == SQLITE_OPEN_WAL];
	size_t n = strlen(zName), k = strlen(suffix);
	if (kind == SQLITE_OPEN_MAIN_DB || n <= k || strcmp(zName + n - k, suffix) != 0)
		return 0644;
	char *db = strndup(zName, n - k);
	struct stat st;
	mode_t mode = db && stat(db, &st) == 0 ? st.st_mode & 0777 : 0644;
	free(db);
	return mode;
}

static int open_flags(int flags)
{
	int o = (flags & SQLITE_OPEN_READWRITE) ? O_RDWR : O_RDONLY;
	if (flags & SQLITE_OPEN_CREATE)
		o |= O_CREAT;
	if (flags & SQLITE_OPEN_EXCLUSIVE)
		o |= O_EXCL;
	return o;
}

/* pc_open; a file that cannot be opened for writing is opened read-only
 * (SQLite then reports SQLITE_READONLY to writers), as the unix VFS does,
 * but not one that another process holds (EBUSY: SQLITE_BUSY). */
static struct pc_file *open_in_cache(struct pc_cache *c, const char *zName, int *flags, mode_t mode)
{
	struct pc_file *f = pc_open(c, zName, open_flags(*flags), mode);
	if (!f && (*flags & SQLITE_OPEN_READWRITE) && errno != EISDIR && errno != EBUSY && errno != ENOMEM) {
		int e = errno;
		int ro = (*flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
		f = pc_open(c, zName, open_flags(ro), mode);
		if (f)
			*flags = ro;
		else
			errno = e;
	}
	return f;
}

/* Fill p for the file f, opened as `flags` asked. */
static int setup_file(struct pcs_file *p, struct pc_file *f, const char *zName, int flags,
		      const struct pcs_settings *s)
{
	struct stat st;
	p->f = f;
	p->kind = flags & KIND_MASK;
	p->readonly = !(flags & SQLITE_OPEN_READWRITE);
	p->rw_flags = (p->kind == SQLITE_OPEN_MAIN_JOURNAL || s->uncached) ? PC_DONTCACHE : 0;
	/* The cache writes whole blocks back: a block is what a power loss
	 * may leave half old, half new (xSectorSize). */
	struct pc_stats pst;
	pc_file_stats(f, &pst);
	p->sector_size = pst.block_size >= 512 ? (int)pst.block_size : 4096;
	p->psow = sqlite3_uri_boolean(zName, "psow", 1);
	p->around = p->kind == SQLITE_OPEN_MAIN_DB && !s->uncached;
	p->next_read = UINT64_MAX;
	p->dirsync = (flags & SQLITE_OPEN_CREATE) && p->kind != SQLITE_OPEN_MAIN_DB;
	if (stat(zName, &st) != 0)
		return pcs_ioerr(SQLITE_CANTOPEN, errno);
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	p->path = strdup(zName);
	p->inode = p->path ? pcs_inode_get(st.st_dev, st.st_ino) : NULL;
	return p->inode ? SQLITE_OK : SQLITE_NOMEM;
}

/*
 * An uncached database (pc_uncached=1) caches the pages SQLite reads back
 * at random while it is open, and drops all of the file at its last close
 * (io.c): an index's leaves, which every insert into it reads again, came
 * from the device each time.  Those reads go through a second handle of
 * the file, cached and without read-ahead (POSIX_FADV_RANDOM): a cached
 * read-ahead window would make the scan that reaches it cached too.
 * Reads that continue the previous one (a scan) and writes stay uncached.
 * NULL (no memory, say) leaves every read uncached.
 */
static struct pc_file *open_random_reader(struct pc_cache *c, const char *zName)
{
	struct pc_file *r = pc_open(c, zName, O_RDONLY, 0);
	if (r && pc_fadvise(r, 0, 0, POSIX_FADV_RANDOM) < 0) {
		pc_close(r);
		r = NULL;
	}
	return r;
}

static int vfs_open(sqlite3_vfs *vfs, const char *zName, sqlite3_file *file, int flags, int *out_flags)
{
	if (!through_cache(zName, flags & KIND_MASK))
		return base_vfs(vfs)->xOpen(base_vfs(vfs), zName, file, flags, out_flags);
	struct pcs_file *p = (struct pcs_file *)file;
	memset(p, 0, sizeof(*p));
	struct pcs_settings s;
	const char *bad = NULL;
	if (pcs_settings_for(zName, &s, &bad) != 0) {
		sqlite3_log(SQLITE_CANTOPEN, "pagecache: %s: bad %s (URI parameter or environment variable)", zName,
			    bad);
		return SQLITE_CANTOPEN;
	}
	struct pc_cache *c = pcs_cache_get(&s);
	if (!c)
		return pcs_ioerr(SQLITE_CANTOPEN, errno);
	struct pc_file *f = open_in_cache(c, zName, &flags, mode_for(zName, flags & KIND_MASK));
	if (!f)
		return pcs_ioerr(SQLITE_CANTOPEN, errno);
	int rc = setup_file(p, f, zName, flags, &s);
	if (rc != SQLITE_OK) {
		if (p->inode)
			pcs_inode_put(p->inode);
		pc_close(f);
		free(p->path);
		memset(p, 0, sizeof(*p));
		return rc;
	}
	if (s.uncached && p->kind == SQLITE_OPEN_MAIN_DB)
		p->random = open_random_reader(c, zName);
	p->base.pMethods = &pcs_io_methods;
	if (out_flags)
		*out_flags = flags;
	return SQLITE_OK;
}

/* ------------------------------------------------ the default VFS's */

static int vfs_delete(sqlite3_vfs *vfs, const char *zName, int syncDir)
{
	return base_vfs(vfs)->xDelete(base_vfs(vfs), zName, syncDir);
}

static int vfs_access(sqlite3_vfs *vfs, const char *zName, int flags, int *out)
{
	return base_vfs(vfs)->xAccess(base_vfs(vfs), zName, flags, out);
}

static int vfs_full_pathname(sqlite3_vfs *vfs, const char *zName, int n, char *out)
{
	return base_vfs(vfs)->xFullPathname(base_vfs(vfs), zName, n, out);
}

static void *vfs_dlopen(sqlite3_vfs *vfs, const char *zPath)
{
	return base_vfs(vfs)->xDlOpen(base_vfs(vfs), zPath);
}

static void vfs_dlerror(sqlite3_vfs *vfs, int n, char *msg)
{
	base_vfs(vfs)->xDlError(base_vfs(vfs), n, msg);
}

static void (*vfs_dlsym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
	return base_vfs(vfs)->xDlSym(base_vfs(vfs), h, sym);
}

static void vfs_dlclose(sqlite3_vfs *vfs, void *h)
{
	base_vfs(vfs)->xDlClose(base_vfs(vfs), h);
}

static int vfs_randomness(sqlite3_vfs *vfs, int n, char *out)
{
	return base_vfs(vfs)->xRandomness(base_vfs(vfs), n, out);
}

static int vfs_sleep(sqlite3_vfs *vfs, int us)
{
	return base_vfs(vfs)->xSleep(base_vfs(vfs), us);
}

static int vfs_current_time(sqlite3_vfs *vfs, double *out)
{
	return base_vfs(vfs)->xCurrentTime(base_vfs(vfs), out);
}

static int vfs_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
	sqlite3_vfs *b = base_vfs(vfs);
	if (b->iVersion >= 2 && b->xCurrentTimeInt64)
		return b->xCurrentTimeInt64(b, out);
	double d;
	int rc = b->xCurrentTime(b, &d);
	*out = (sqlite3_int64)(d * 86400000.0);
	return rc;
}

/* --------------------------------------------------------- register */

static sqlite3_vfs pagecache_vfs = {
	.iVersion = 2,
	.zName = PCS_VFS_NAME,
	.xOpen = vfs_open,
	.xDelete = vfs_delete,
	.xAccess = vfs_access,
	.xFullPathname = vfs_full_pathname,
	.xDlOpen = vfs_dlopen,
	.xDlError = vfs_dlerror,
	.xDlSym = vfs_dlsym,
	.xDlClose = vfs_dlclose,
	.xRandomness = vfs_randomness,
	.xSleep = vfs_sleep,
	.xCurrentTime = vfs_current_time,
	.xGetLastError = pcs_last_error,
	.xCurrentTimeInt64 = vfs_current_time64,
};
static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;

/* The default VFS at the first registration (later, the default may be
 * this one) is where the rest goes. */
static int find_base(void)
{
	if (pagecache_vfs.pAppData)
		return SQLITE_OK;
	sqlite3_vfs *b = sqlite3_vfs_find(NULL);
	if (b == &pagecache_vfs || (b && !strcmp(b->zName, PCS_VFS_NAME)))
		b = sqlite3_vfs_find("unix");
	if (!b)
		return SQLITE_ERROR;
	pagecache_vfs.pAppData = b;
	pagecache_vfs.mxPathname = b->mxPathname;
	pagecache_vfs.szOsFile = b->szOsFile > (int)sizeof(struct pcs_file) ? b->szOsFile
									     : (int)sizeof(struct pcs_file);
	return SQLITE_OK;
}

int pcs_register(const struct pc_config *cfg, int make_default)
{
	pthread_mutex_lock(&register_lock);
	int rc = find_base();
	if (rc == SQLITE_OK && cfg)
		rc = pcs_cache_set_base(cfg);
	/* Registered again even after SQLITE_MISUSE: make_default still
	 * counts, and the VFS is there. */
	if (rc == SQLITE_OK || rc == SQLITE_MISUSE) {
		int r2 = sqlite3_vfs_register(&pagecache_vfs, make_default);
		if (r2 != SQLITE_OK)
			rc = r2;
	}
	pthread_mutex_unlock(&register_lock);
	return rc;
}

PC_API int sqlite3_pagecache_register(const struct pc_config *cfg, int make_default)
{
	pcs_api_use_linked();
	return pcs_register(cfg, make_default);
}
