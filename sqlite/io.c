/*
 * io.c - the methods of a file open through the cache.
 *
 * Version 1 methods: no xShm*, so SQLite keeps a WAL's index in heap
 * memory, which it does only in exclusive locking mode (PRAGMA
 * locking_mode=EXCLUSIVE before the database is first read); in the normal
 * mode, PRAGMA journal_mode=WAL leaves the journal mode as it was and a
 * database already in WAL mode is SQLITE_CANTOPEN.  No xFetch: SQLite's
 * memory-mapped I/O would map the backing file and bypass the cache.
 */
#include "vfs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct pcs_file *pcs(sqlite3_file *file)
{
	return (struct pcs_file *)file;
}

/* Before the handle goes, its dirty data goes to the backing file: once
 * pagecache's lock is released another process may read the file (plain
 * SQLite reading a journal it takes for hot, say), and the kernel's page
 * cache would have shown it what this connection wrote.  A clean file is
 * settled and unlocked by pc_close at once. */
static int io_close(sqlite3_file *file)
{
	struct pcs_file *p = pcs(file);
	int rc = SQLITE_OK;
	bool alone = p->inode && pcs_inode_alone(p->inode);
	if (p->inode) {
		pcs_unlock(p->inode, &p->lock, SQLITE_LOCK_NONE);
		pcs_inode_put(p->inode);
	}
	if (p->f && !p->readonly && pc_flush(p->f, 1) < 0)
		rc = pcs_ioerr(SQLITE_IOERR_CLOSE, errno);
	/* The pages an uncached connection read back at random go with it,
	 * unless another connection of the process has the file open
	 * (vfs.c, open_random_reader). */
	if (p->random) {
		if (alone)
			pc_fadvise(p->f, 0, 0, POSIX_FADV_DONTNEED);
		pc_close(p->random);
	}
	if (p->f && pc_close(p->f) < 0 && rc == SQLITE_OK)
		rc = pcs_ioerr(SQLITE_IOERR_CLOSE, errno);
	free(p->path);
	free(p->scratch);
	memset(p, 0, sizeof(*p));
	return rc;
}

/*
 * Read-around.  A cold database read at random is read a page per miss,
 * each a device round trip; the kernel's page cache, under the unix VFS,
 * reads more around such misses once their neighbours are cached (its
 * context read-ahead), so later lookups find their pages and it ends up
 * reading the whole file in large reads.  A b-tree's pages are where the
 * next lookups go too, so a miss of the main database reads the aligned
 * READ_AROUND bytes around the page in one device read (the same latency
 * as one page here: a device read is mostly its round trip), the page into
 * SQLite's buffer and the rest into the cache.  Only while the database
 * fits in half the cache: with a larger one the neighbours would evict
 * pages that lookups use.  Not for uncached connections (the neighbours
 * would be read and dropped), nor for reads that continue the previous one
 * (a scan: the library's read-ahead follows it).
 */
#define READ_AROUND ((size_t)128 << 10)

/* The read of [off, off + amt) as part of the aligned READ_AROUND bytes
 * around it: 1 read, 0 not done (the caller reads as usual), or an SQLite
 * error. */
static int read_around(struct pcs_file *p, void *buf, int amt, sqlite3_int64 off)
{
	uint64_t start = (uint64_t)off & ~(uint64_t)(READ_AROUND - 1), end = start + READ_AROUND;
	off_t size = pc_size(p->f);
	if (size < 0 || (uint64_t)size < end || (uint64_t)off + (uint64_t)amt > end ||
	    (uint64_t)size > pcs_cache_memory() / 2)
		return 0;
	if (!p->scratch && !(p->scratch = malloc(READ_AROUND)))
		return 0;
	size_t before = (size_t)((uint64_t)off - start), after = (size_t)(end - (uint64_t)off - (uint64_t)amt);
	struct iovec v[3];
	int n = 0;
	if (before)
		v[n++] = (struct iovec){ p->scratch, before };
	v[n++] = (struct iovec){ buf, (size_t)amt };
	if (after)
		v[n++] = (struct iovec){ p->scratch + before + amt, after };
	ssize_t r;
	do
		r = pc_preadv(p->f, v, n, (off_t)start, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return pcs_ioerr(SQLITE_IOERR_READ, errno);
	return r == (ssize_t)READ_AROUND; /* short: truncated meanwhile */
}

/* A read past the end fills the rest with zeros: SQLite reads a page of
 * a file that ends short and counts on the zeros. */
static int io_read(sqlite3_file *file, void *buf, int amt, sqlite3_int64 off)
{
	struct pcs_file *p = pcs(file);
	size_t done = 0;
	bool scan = p->next_read == (uint64_t)off;
	p->next_read = (uint64_t)off + (uint64_t)amt;
	if (p->around && !scan) {
		/* A hit, or a miss (EAGAIN, or a short count): read around.
		 * A PC_NOWAIT hit leaves a read-ahead mark to the scan that
		 * reaches it (pc_pread(3)). */
		ssize_t n = pc_pread(p->f, buf, (size_t)amt, off, PC_NOWAIT);
		if (n == amt)
			return SQLITE_OK;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return pcs_ioerr(SQLITE_IOERR_READ, errno);
		int rc = read_around(p, buf, amt, off);
		if (rc == 1)
			return SQLITE_OK;
		if (rc != 0)
			return rc;
	}
	while (done < (size_t)amt) {
		ssize_t n = pc_pread(p->f, (char *)buf + done, (size_t)amt - done, off + (off_t)done,
				     p->random && !scan ? p->rw_flags | PC_NOWAIT : p->rw_flags);
		/* An uncached connection's read back at random: found in the
		 * cache (an uncached read leaves what it finds as it is), or
		 * read cached through the random reader (vfs.c). */
		if (p->random && !scan && n < 0 && errno == EAGAIN)
			n = pc_pread(p->random, (char *)buf + done, (size_t)amt - done, off + (off_t)done, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return pcs_ioerr(SQLITE_IOERR_READ, errno);
		if (n == 0) {
			memset((char *)buf + done, 0, (size_t)amt - done);
			return SQLITE_IOERR_SHORT_READ;
		}
		done += (size_t)n;
	}
	return SQLITE_OK;
}

/* A journal's writes are uncached, but for its header's sector: SQLite
 * writes the header whole, syncs the journal, then writes its first 12
 * bytes again (the record count) before the second sync.  Dropped behind
 * after the first sync, that block would have to be read back from the
 * device for the small write, once per transaction. */
static int write_flags(const struct pcs_file *p, sqlite3_int64 off)
{
	if (p->kind == SQLITE_OPEN_MAIN_JOURNAL && off < p->sector_size)
		return p->rw_flags & ~PC_DONTCACHE;
	return p->rw_flags;
}

static int io_write(sqlite3_file *file, const void *buf, int amt, sqlite3_int64 off)
{
	struct pcs_file *p = pcs(file);
	size_t done = 0;
	while (done < (size_t)amt) {
		ssize_t n = pc_pwrite(p->f, (const char *)buf + done, (size_t)amt - done, off + (off_t)done,
				      write_flags(p, off + (sqlite3_int64)done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return pcs_ioerr(SQLITE_IOERR_WRITE, n < 0 ? errno : EIO);
		done += (size_t)n;
	}
	return SQLITE_OK;
}

static int io_truncate(sqlite3_file *file, sqlite3_int64 size)
{
	if (pc_ftruncate(pcs(file)->f, (off_t)size) < 0)
		return pcs_ioerr(SQLITE_IOERR_TRUNCATE, errno);
	return SQLITE_OK;
}

/* A journal or WAL this connection created is named in its directory
 * only once the directory is synced too (as the unix VFS does at the
 * first sync after creating one). */
static int sync_directory(struct pcs_file *p)
{
	char *copy = strdup(p->path);
	if (!copy)
		return SQLITE_IOERR_NOMEM;
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return SQLITE_OK; /* as the unix VFS: a directory it cannot open is no error */
	int rc = fsync(fd) < 0 ? pcs_ioerr(SQLITE_IOERR_DIR_FSYNC, errno) : SQLITE_OK;
	close(fd);
	if (rc == SQLITE_OK)
		p->dirsync = false;
	return rc;
}

/* SQLITE_SYNC_DATAONLY asks for the data (and the size) only:
 * pc_fdatasync; otherwise pc_fsync.  NORMAL and FULL are the same here:
 * both flush the device. */
static int io_sync(sqlite3_file *file, int flags)
{
	struct pcs_file *p = pcs(file);
	int r = (flags & SQLITE_SYNC_DATAONLY) ? pc_fdatasync(p->f) : pc_fsync(p->f);
	if (r < 0)
		return pcs_ioerr(SQLITE_IOERR_FSYNC, errno);
	return p->dirsync ? sync_directory(p) : SQLITE_OK;
}

static int io_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
	off_t n = pc_size(pcs(file)->f);
	if (n < 0)
		return pcs_ioerr(SQLITE_IOERR_FSTAT, errno);
	*size = n;
	return SQLITE_OK;
}

static int io_lock(sqlite3_file *file, int level)
{
	struct pcs_file *p = pcs(file);
	return pcs_lock(p->inode, &p->lock, level);
}

static int io_unlock(sqlite3_file *file, int level)
{
	struct pcs_file *p = pcs(file);
	pcs_unlock(p->inode, &p->lock, level);
	return SQLITE_OK;
}

static int io_check_reserved(sqlite3_file *file, int *out)
{
	*out = pcs_reserved(pcs(file)->inode);
	return SQLITE_OK;
}

static int io_sector_size(sqlite3_file *file)
{
	return pcs(file)->sector_size;
}

/* Only what is true.  POWERSAFE_OVERWRITE: a write changes no byte
 * outside its range, also across a crash, as with the kernel's page
 * cache: the rest of a block written in part is the file's own data
 * (read in, or merged with the device's at write-back).  No ATOMIC*
 * size (the device promises none), no SAFE_APPEND (a file's size and
 * its new blocks reach the device in no promised order), no SEQUENTIAL
 * (write-back reorders). */
static int io_device_characteristics(sqlite3_file *file)
{
	return pcs(file)->psow ? SQLITE_IOCAP_POWERSAFE_OVERWRITE : 0;
}

const sqlite3_io_methods pcs_io_methods = {
	.iVersion = 1,
	.xClose = io_close,
	.xRead = io_read,
	.xWrite = io_write,
	.xTruncate = io_truncate,
	.xSync = io_sync,
	.xFileSize = io_file_size,
	.xLock = io_lock,
	.xUnlock = io_unlock,
	.xCheckReservedLock = io_check_reserved,
	.xFileControl = pcs_file_control,
	.xSectorSize = io_sector_size,
	.xDeviceCharacteristics = io_device_characteristics,
};
