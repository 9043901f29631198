/*
 * paths.c - the I/O paths every suite runs, each in this process on the
 * same file system: the kernel's page cache (buffered, RWF_DONTCACHE,
 * O_DIRECT) and pagecache's (buffered, PC_DONTCACHE, PC_DIRECT), with
 * +dsync (RWF_DSYNC / PC_DSYNC) where a suite measures it: interleaved,
 * as the seed, which compares RWF_DONTCACHE|RWF_DSYNC with the same
 * write without RWF_DONTCACHE, i.e. buffered+dsync.  Also what --only
 * selects, and the caches of every suite (bench_config: the options'
 * block size, edge budget and io_uring apply to all of them).
 */
#include "bench.h"

const struct bpath bpaths[P_COUNT] = {
	[P_KBUF] = { "kernel-buffered", false, false, 0 },
	[P_KDC] = { "kernel-dontcache", false, false, RWF_DONTCACHE },
	[P_KDC_DSYNC] = { "kernel-dontcache+dsync", false, false, RWF_DONTCACHE | RWF_DSYNC },
	[P_KDIRECT] = { "kernel-direct", false, true, 0 },
	[P_KDIRECT_DSYNC] = { "kernel-direct+dsync", false, true, RWF_DSYNC },
	[P_PBUF] = { "pagecache-buffered", true, false, 0 },
	[P_PDC] = { "pagecache-dontcache", true, false, PC_DONTCACHE },
	[P_PDC_DSYNC] = { "pagecache-dontcache+dsync", true, false, PC_DONTCACHE | PC_DSYNC },
	[P_PDIRECT] = { "pagecache-direct", true, false, PC_DIRECT },
	[P_PDIRECT_DSYNC] = { "pagecache-direct+dsync", true, false, PC_DIRECT | PC_DSYNC },
	[P_KBUF_DSYNC] = { "kernel-buffered+dsync", false, false, RWF_DSYNC },
	[P_PBUF_DSYNC] = { "pagecache-buffered+dsync", true, false, PC_DSYNC },
};

/* A word of --only matches a path whose name contains it ("dontcache"
 * selects all four uncached paths, "kernel-direct" both direct ones,
 * "kernel-buffered" kernel-buffered-2-threads of the hits too). */
bool name_selected(const char *name)
{
	char word[64];

	if (!bo.only)
		return true;
	for (const char *s = bo.only; *s;) {
		size_t n = strcspn(s, ",");

		if (n && n < sizeof(word)) {
			memcpy(word, s, n);
			word[n] = '\0';
			if (strstr(name, word))
				return true;
		}
		s += n + (s[n] == ',');
	}
	return false;
}

bool path_selected(const struct bpath *p)
{
	return name_selected(p->name);
}

/*
 * A new cache's thread faults its memory in while the program starts; that
 * is start-up (suite startup and interleaved's table 3 measure it), so a
 * workload waits for it to end (at most a minute) and measures a cache in
 * use, as the kernel's page cache always is.
 */
void bench_wait_prefault(struct pc_cache *c)
{
	struct pc_stats s;

	for (int i = 0; i < 6000; i++) {
		pc_cache_stats(c, &s);
		if (!s.prefault_pending_bytes)
			return;
		usleep(10000);
	}
}

void bench_config(struct pc_config *cfg, uint64_t mem, unsigned flags)
{
	pc_config_init(cfg);
	cfg->flags = flags;
	cfg->memory_limit = (size_t)mem;
	cfg->block_size = (size_t)bo.block_size;
	cfg->edge_budget_bytes = (size_t)bo.edge_budget;
	if (bo.no_io_uring)
		cfg->flags |= PC_CFG_NO_IO_URING;
}

struct pc_cache *bench_cache_from(const struct pc_config *cfg)
{
	struct pc_cache *c = pc_cache_new(cfg);

	if (c && cfg->flags & PC_CFG_EAGER_MEMORY)
		bench_wait_prefault(c);
	return c;
}

static struct pc_cache *bench_cache_with(size_t max_folio, size_t block_size, unsigned flags)
{
	struct pc_config cfg;

	bench_config(&cfg, bo.mem, flags);
	if (block_size)
		cfg.block_size = block_size;
	if (max_folio)
		cfg.max_folio_size = max_folio;
	return bench_cache_from(&cfg);
}

/* A cache in use, as the kernel's page cache always is: all of its memory
 * faulted in (PC_CFG_EAGER_MEMORY) before the workload. */
struct pc_cache *bench_cache_new(size_t max_folio, size_t block_size)
{
	return bench_cache_with(max_folio, block_size, PC_CFG_EAGER_MEMORY);
}

struct pc_cache *bench_cache_new_unsettled(size_t max_folio, size_t block_size)
{
	return bench_cache_with(max_folio, block_size, 0);
}

void bench_stats_delta(struct pc_stats *d, const struct pc_stats *a, const struct pc_stats *b)
{
	*d = *b;
	d->dev_read_ios = b->dev_read_ios - a->dev_read_ios;
	d->dev_read_bytes = b->dev_read_bytes - a->dev_read_bytes;
	d->dev_write_ios = b->dev_write_ios - a->dev_write_ios;
	d->dev_write_bytes = b->dev_write_bytes - a->dev_write_bytes;
	d->hit_bytes = b->hit_bytes - a->hit_bytes;
	d->miss_bytes = b->miss_bytes - a->miss_bytes;
}

int bf_fail(struct bfile *f, const char *what)
{
	int e = errno;

	snprintf(f->err, sizeof(f->err), "%s failed: %s (errno %d)", what, strerror(e), e);
	errno = e;
	return -1;
}

int bf_open(struct bfile *f, const struct bpath *p, struct pc_cache *c, const char *file, int oflags)
{
	memset(f, 0, sizeof(*f));
	f->p = p;
	f->fd = -1;
	if (!p->pc) {
		f->fd = open(file, oflags | O_CLOEXEC | (p->odirect ? O_DIRECT : 0), 0644);
		return f->fd < 0 ? bf_fail(f, p->odirect ? "open(O_DIRECT)" : "open") : 0;
	}
	f->c = c;
	if (!c) {
		f->c = bench_cache_new(0, 0);
		f->own_cache = true;
		if (!f->c)
			return bf_fail(f, "pc_cache_new");
	}
	f->pf = pc_open(f->c, file, oflags, 0644);
	if (!f->pf) {
		bf_fail(f, "pc_open");
		if (f->own_cache)
			pc_cache_destroy(f->c);
		f->c = NULL;
		return -1;
	}
	return 0;
}

ssize_t bf_pwrite(struct bfile *f, const void *buf, size_t n, uint64_t off)
{
	struct iovec v = { (void *)buf, n };

	if (f->p->pc)
		return pc_pwrite(f->pf, buf, n, (off_t)off, f->p->flags);
	return pwritev2(f->fd, &v, 1, (off_t)off, f->p->flags);
}

/* Reads take the path's flags without DSYNC (which means nothing there). */
ssize_t bf_pread(struct bfile *f, void *buf, size_t n, uint64_t off)
{
	struct iovec v = { buf, n };

	if (f->p->pc)
		return pc_pread(f->pf, buf, n, (off_t)off, f->p->flags & ~PC_DSYNC);
	return preadv2(f->fd, &v, 1, (off_t)off, f->p->flags & ~RWF_DSYNC);
}

int bf_fsync(struct bfile *f)
{
	if (f->p->pc)
		return pc_fsync(f->pf) < 0 ? bf_fail(f, "pc_fsync") : 0;
	return fsync(f->fd) < 0 ? bf_fail(f, "fsync") : 0;
}

double bf_cached(struct bfile *f, const char *file)
{
	if (f->p->pc) {
		struct pc_stats s;

		pc_cache_stats(f->c, &s);
		return (double)s.cached_bytes;
	}
	int64_t v = bu_kernel_resident_bytes(file);
	return v < 0 ? NAN : (double)v;
}

int bf_close(struct bfile *f)
{
	int ret = 0;

	if (!f->p)
		return 0;
	if (f->fd >= 0 && close(f->fd) < 0)
		ret = bf_fail(f, "close");
	if (f->pf && pc_close(f->pf) < 0)
		ret = bf_fail(f, "pc_close");
	if (f->own_cache && f->c && pc_cache_destroy(f->c) < 0)
		ret = bf_fail(f, "pc_cache_destroy");
	f->fd = -1;
	f->pf = NULL;
	f->c = NULL;
	f->p = NULL;
	return ret;
}
