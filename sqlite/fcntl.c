/*
 * fcntl.c - xFileControl: PRAGMA pagecache_stats, and the file controls
 * of SQLite that mean something for a file in the cache.
 *
 *   PRAGMA pagecache_stats          the cache's counters (pc_stats(3)),
 *                                   one "name value" line each
 *   PRAGMA pagecache_stats=file     the same of this database's file
 *   PRAGMA pagecache_stats=NAME     one counter of the cache, a number
 *
 * Other controls answer SQLITE_NOTFOUND, which SQLite takes for "not
 * supported" (a SIZE_HINT, for one, is no use: pagecache reserves space
 * ahead of a growing file itself).
 */
#include "vfs.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define COUNTER(name) { #name, offsetof(struct pc_stats, name) }
static const struct counter {
	const char *name;
	size_t off;
} counters[] = {
	COUNTER(dev_read_ios), COUNTER(dev_read_bytes), COUNTER(dev_write_ios), COUNTER(dev_write_bytes),
	COUNTER(cached_bytes), COUNTER(dirty_bytes), COUNTER(dirty_uncached_bytes), COUNTER(peak_dirty_bytes),
	COUNTER(writeback_bytes), COUNTER(folios), COUNTER(evictions), COUNTER(dropbehind_drops),
	COUNTER(edge_kept), COUNTER(edge_completed), COUNTER(edge_expired), COUNTER(edge_evicted_budget),
	COUNTER(edge_waits), COUNTER(deferred_rmw), COUNTER(rmw_reads), COUNTER(hit_bytes), COUNTER(miss_bytes),
	COUNTER(throttle_waits), COUNTER(throttle_pauses), COUNTER(flusher_kicks), COUNTER(reserve_inline),
	COUNTER(write_errors), COUNTER(ra_sync_windows), COUNTER(ra_async_windows), COUNTER(ra_window_bytes),
	COUNTER(ra_random_reads), COUNTER(prefault_pending_bytes),
};
#define NCOUNTERS (sizeof(counters) / sizeof(counters[0]))

static unsigned long long counter_value(const struct pc_stats *st, const struct counter *c)
{
	uint64_t v;
	memcpy(&v, (const char *)st + c->off, sizeof(v));
	return (unsigned long long)v;
}

/* Every counter, one "name value" line each (sqlite3_malloc'ed). */
static char *format_all(const struct pc_stats *st)
{
	char *out = sqlite3_mprintf("io_uring %u\nblock_size %u", st->io_uring, st->block_size);
	for (size_t i = 0; i < NCOUNTERS && out; i++) {
		char *next = sqlite3_mprintf("%s\n%s %llu", out, counters[i].name, counter_value(st, &counters[i]));
		sqlite3_free(out);
		out = next;
	}
	return out;
}

/* aArg: [0] the result or error message (out), [1] the pragma's name,
 * [2] its argument or NULL. */
static int pragma(struct pcs_file *p, char **aArg)
{
	if (strcasecmp(aArg[1], "pagecache_stats") != 0)
		return SQLITE_NOTFOUND;
	const char *arg = aArg[2];
	struct pc_stats st;
	if (arg && !strcasecmp(arg, "file")) {
		pc_file_stats(p->f, &st);
		aArg[0] = format_all(&st);
		return aArg[0] ? SQLITE_OK : SQLITE_NOMEM;
	}
	pc_cache_stats(pcs_cache_current(), &st);
	if (!arg) {
		aArg[0] = format_all(&st);
		return aArg[0] ? SQLITE_OK : SQLITE_NOMEM;
	}
	for (size_t i = 0; i < NCOUNTERS; i++)
		if (!strcasecmp(arg, counters[i].name)) {
			aArg[0] = sqlite3_mprintf("%llu", counter_value(&st, &counters[i]));
			return aArg[0] ? SQLITE_OK : SQLITE_NOMEM;
		}
	aArg[0] = sqlite3_mprintf("pagecache_stats: no counter \"%s\" (pc_stats(3) names them)", arg);
	return SQLITE_ERROR;
}

/* The file is no longer the one the path names (unlinked, renamed over). */
static int has_moved(struct pcs_file *p)
{
	struct stat st;
	return stat(p->path, &st) != 0 || st.st_dev != p->dev || st.st_ino != p->ino;
}

/* PERSIST_WAL and POWERSAFE_OVERWRITE: *arg < 0 asks, else sets. */
static void flag_control(bool *flag, int *arg)
{
	if (*arg < 0)
		*arg = *flag;
	else
		*flag = *arg != 0;
}

int pcs_file_control(sqlite3_file *file, int op, void *arg)
{
	struct pcs_file *p = (struct pcs_file *)file;
	switch (op) {
	case SQLITE_FCNTL_PRAGMA:
		return pragma(p, arg);
	case SQLITE_FCNTL_LOCKSTATE:
		*(int *)arg = p->lock;
		return SQLITE_OK;
	case SQLITE_FCNTL_VFSNAME:
		*(char **)arg = sqlite3_mprintf("%s", PCS_VFS_NAME);
		return SQLITE_OK;
	case SQLITE_FCNTL_HAS_MOVED:
		*(int *)arg = has_moved(p);
		return SQLITE_OK;
	case SQLITE_FCNTL_PERSIST_WAL:
		flag_control(&p->persist_wal, arg);
		return SQLITE_OK;
	case SQLITE_FCNTL_POWERSAFE_OVERWRITE:
		flag_control(&p->psow, arg);
		return SQLITE_OK;
	default:
		return SQLITE_NOTFOUND;
	}
}
