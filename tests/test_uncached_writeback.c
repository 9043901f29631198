/*
 * test_uncached_writeback.c - the flusher's writeback of uncached
 * (PC_DONTCACHE) data, and the counters that track it:
 *
 *   - an uncached writer past uncached_kick_bytes kicks the flusher, which
 *     writes its data back without fsync; a buffered writer below the
 *     background threshold does not;
 *   - short runs wait for neighbours a moment, but are written without
 *     fsync (uncached ones at the flusher's tick, buffered ones once
 *     dirty_expire_ms has passed);
 *   - the uncached dirty counter never goes negative nor above the dirty
 *     counter, over a random mix of every kind of operation (printed
 *     seed).
 *
 * Environment: PC_SEED (the random mix's seed), PC_OPS (its operations,
 * default 3000).
 */
#include "uncached_util.h"

#include <linux/falloc.h>
#include <sys/uio.h>

TEST_SCRATCH_DIR("uncached_writeback")

/* Past uncached_kick_bytes the flusher is kicked and writes everything
 * back (age never would here); a buffered writer before did not kick. */
TEST_CASE(uncached_writer_past_kick_bytes_kicks_flusher)
{
	struct pc_config cfg = no_aging_config(4096);
	cfg.uncached_kick_bytes = 256 * KiB;
	cfg.dirty_expire_ms = 600000; /* age never explains writeback here */
	struct pc_cache *c = tu_cache_new(&cfg);
	char path[4200];
	const size_t N = 1 * MiB;
	uint8_t *buf = malloc(N);
	REQUIRE(buf);
	tu_fill_pattern(buf, N, 9, 0);

	/* A buffered writer below the background threshold does not kick. */
	struct pc_file *hb = open_new(c, dir, "kick_buffered", path, sizeof(path));
	CHECK(pc_pwrite(hb, buf, N, 0, 0) == (ssize_t)N);
	struct pc_stats s = tu_stats(c);
	CHECK(s.flusher_kicks == 0);
	CHECK(pc_close(hb) == 0);

	struct pc_file *h = open_new(c, dir, "kick", path, sizeof(path));
	for (size_t off = 0; off < N; off += 64 * KiB)
		CHECK(pc_pwrite(h, buf + off, 64 * KiB, (off_t)off, PC_DONTCACHE) == (ssize_t)(64 * KiB));
	s = tu_stats(c);
	printf("   flusher_kicks %llu, dirty now %llu\n", (unsigned long long)s.flusher_kicks,
	       (unsigned long long)s.dirty_bytes);
	CHECK(s.flusher_kicks > 0);
	CHECK(TU_POLL(tu_stats(c).dirty_bytes == 0 && tu_stats(c).writeback_bytes == 0, 5000));
	struct pc_stats fs;
	CHECK(TU_POLL((pc_file_stats(h, &fs), fs.cached_bytes == 0), 5000));
	s = tu_stats(c);
	CHECK(s.dev_write_bytes >= 2 * N); /* both files' data */
	CHECK(s.dev_read_ios == 0);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, N));
	CHECK(pc_cache_destroy(c) == 0);
	free(buf);
}

/*
 * Background writeback holds short runs of young data back a moment (so
 * neighbouring writes can join them into one device write), but never for
 * good: a lone small uncached write below the kick threshold is written
 * and dropped by the flusher's tick, and a lone small buffered write once
 * dirty_expire_ms has passed, both without fsync.
 */
TEST_CASE(short_runs_written_without_fsync)
{
	struct pc_config cfg = no_aging_config(4096);
	cfg.uncached_kick_bytes = 8 * MiB;
	cfg.dirty_expire_ms = 300;
	struct pc_cache *c = tu_cache_new(&cfg);
	char path[4200], path2[4200];
	uint8_t buf[16 * KiB];
	tu_fill_pattern(buf, sizeof(buf), 10, 0);
	struct pc_file *h = open_new(c, dir, "short_uncached", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, sizeof(buf), 64 * KiB, PC_DONTCACHE) == (ssize_t)sizeof(buf));
	struct pc_file *b = open_new(c, dir, "short_buffered", path2, sizeof(path2));
	CHECK(pc_pwrite(b, buf, 8 * KiB, 0, 0) == 8 * (ssize_t)KiB);
	struct pc_stats fs;
	CHECK(TU_POLL((pc_file_stats(h, &fs), fs.cached_bytes == 0), 10000));
	CHECK(TU_POLL((pc_file_stats(b, &fs), fs.dirty_bytes == 0 && fs.writeback_bytes == 0), 10000));
	struct pc_stats s = tu_stats(c);
	CHECK(s.flusher_kicks == 0);
	CHECK(s.dev_write_bytes == sizeof(buf) + 8 * KiB);
	CHECK(pc_close(h) == 0);
	CHECK(pc_close(b) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

#define I_CAP (2 * MiB)
#define I_MAXLEN (96 * KiB)

/* Counter invariants: never negative; uncached <= dirty.  The two are not
 * read atomically together while the flusher changes them, so a violation
 * of the second must persist (past TU_POLL's bound) to count. */
static bool counters_ok(struct pc_cache *c, struct pc_file *h, const char *when, unsigned op)
{
	struct pc_mapping *m = h->m;
	int64_t cu = atomic_load(&c->uncached), cd = atomic_load(&c->dirty), cw = atomic_load(&c->writeback);
	int64_t mu = atomic_load(&m->nr_uncached), md = atomic_load(&m->nr_dirty);
	int64_t du = atomic_load(&m->dom->uncached), dd = atomic_load(&m->dom->dirty);
	if (cu < 0 || cd < 0 || cw < 0 || mu < 0 || md < 0 || du < 0 || dd < 0) {
		fprintf(stderr,
			"   op %u (%s): negative counter: cache uncached %lld dirty %lld writeback %lld, "
			"mapping uncached %lld dirty %lld, domain uncached %lld dirty %lld\n",
			op, when, (long long)cu, (long long)cd, (long long)cw, (long long)mu, (long long)md,
			(long long)du, (long long)dd);
		return false;
	}
	struct pc_stats s;
	if (TU_POLL((s = tu_stats(c), s.dirty_uncached_bytes <= s.dirty_bytes &&
				      atomic_load(&c->uncached) <= atomic_load(&c->dirty)),
		    50))
		return true;
	fprintf(stderr, "   op %u (%s): dirty_uncached_bytes %llu > dirty_bytes %llu (persisting)\n", op, when,
		(unsigned long long)s.dirty_uncached_bytes, (unsigned long long)s.dirty_bytes);
	return false;
}

/* A random mix of writes (plain, uncached, PC_DSYNC, PC_DIRECT, in one
 * piece or two), reads, truncates, punches, fsyncs and fadvises, checked
 * against a model of the file; the counters are checked after each. */
TEST_CASE(uncached_dirty_counter_never_negative)
{
	uint64_t seed = test_seed("uncached counters", 0x5eed0003);
	unsigned nops = 3000;
	const char *e = getenv("PC_OPS");
	if (e && atoi(e) > 0)
		nops = (unsigned)atoi(e);
	printf("   %u operations\n", nops);
	struct pc_config cfg = no_aging_config(4096);
	cfg.memory_limit = 4 * MiB;     /* eviction and throttling too */
	cfg.max_folio_size = 64 * KiB;
	cfg.uncached_kick_bytes = 128 * KiB;
	cfg.dirty_expire_ms = 300;
	cfg.edge_expire_ms = 400;
	struct pc_cache *c = tu_cache_new(&cfg);
	char path[4200];
	struct pc_file *h = open_new(c, dir, "counters", path, sizeof(path));
	uint8_t *model = calloc(1, I_CAP + I_MAXLEN), *buf = malloc(I_MAXLEN), *back = malloc(I_MAXLEN);
	REQUIRE(model && buf && back);
	uint64_t size = 0;
	static const int wflags[] = { 0, PC_DONTCACHE, PC_DONTCACHE, PC_DONTCACHE, PC_DSYNC,
				      PC_DONTCACHE | PC_DSYNC, PC_DIRECT, PC_DIRECT | PC_DSYNC };
	static const int rflags[] = { 0, PC_DONTCACHE, PC_DONTCACHE, PC_DIRECT };
	bool ok = true;
	for (unsigned op = 0; op < nops && ok; op++) {
		unsigned kind = (unsigned)(tu_rand(&seed) % 100);
		uint64_t off = tu_rand(&seed) % I_CAP;
		if (tu_rand(&seed) % 3 == 0)
			off &= ~4095ull;
		uint64_t len = 1 + tu_rand(&seed) % (tu_rand(&seed) % 4 == 0 ? I_MAXLEN : 9000);
		if (off + len > I_CAP)
			len = I_CAP - off;
		const char *what;
		if (kind < 45) {
			int fl = wflags[tu_rand(&seed) % 8];
			what = "write";
			for (uint64_t i = 0; i < len; i++)
				buf[i] = (uint8_t)tu_rand(&seed);
			ssize_t r;
			if (tu_rand(&seed) % 4 == 0 && len > 1) {
				size_t cut = 1 + tu_rand(&seed) % (len - 1);
				struct iovec v[2] = { { buf, cut }, { buf + cut, len - cut } };
				r = pc_pwritev(h, v, 2, (off_t)off, fl);
			} else {
				r = pc_pwrite(h, buf, len, (off_t)off, fl);
			}
			if (r != (ssize_t)len) {
				fprintf(stderr, "   op %u: write %llu+%llu flags %d returned %zd\n", op,
					(unsigned long long)off, (unsigned long long)len, fl, r);
				ok = false;
			}
			memcpy(model + off, buf, len);
			if (off + len > size)
				size = off + len;
		} else if (kind < 80) {
			int fl = rflags[tu_rand(&seed) % 4];
			what = "read";
			ssize_t r = pc_pread(h, back, len, (off_t)off, fl);
			uint64_t want = off >= size ? 0 : (size - off < len ? size - off : len);
			if (r != (ssize_t)want || memcmp(back, model + off, want) != 0) {
				fprintf(stderr, "   op %u: read %llu+%llu flags %d: got %zd (want %llu) or wrong data\n",
					op, (unsigned long long)off, (unsigned long long)len, fl, r,
					(unsigned long long)want);
				ok = false;
			}
		} else if (kind < 86) {
			what = "truncate";
			uint64_t ns = tu_rand(&seed) % I_CAP;
			if (pc_ftruncate(h, (off_t)ns) != 0) {
				ok = false;
			}
			if (ns < size)
				memset(model + ns, 0, size - ns);
			size = ns;
		} else if (kind < 92) {
			what = "punch";
			int r = pc_fallocate(h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
			if (r != 0) {
				fprintf(stderr, "   op %u: punch failed errno %d\n", op, errno);
				ok = false;
			}
			if (off < size)
				memset(model + off, 0, (off + len > size ? size : off + len) - off);
		} else if (kind < 97) {
			what = "fsync";
			if (pc_fsync(h) != 0)
				ok = false;
		} else {
			what = "fadvise";
			int adv = tu_rand(&seed) % 2 ? POSIX_FADV_NOREUSE : POSIX_FADV_NORMAL;
			if (tu_rand(&seed) % 3 == 0)
				adv = POSIX_FADV_DONTNEED;
			if (pc_fadvise(h, (off_t)off, (off_t)len, adv) != 0)
				ok = false;
		}
		if (!counters_ok(c, h, what, op))
			ok = false;
		if (!ok)
			fprintf(stderr, "   stopped at op %u (%s); replay with PC_SEED\n", op, what);
	}
	CHECK(ok);
	CHECK(pc_fsync(h) == 0);
	struct pc_stats s = tu_stats(c);
	CHECK(s.dirty_uncached_bytes == 0);
	CHECK(s.dirty_bytes == 0);
	CHECK(atomic_load(&c->uncached) == 0);
	CHECK(atomic_load(&c->dirty) == 0);
	CHECK(atomic_load(&h->m->nr_uncached) == 0);
	CHECK(atomic_load(&h->m->dom->uncached) == 0);
	if (atomic_load(&c->uncached) != 0 || atomic_load(&c->dirty) != 0)
		fprintf(stderr, "   after the final fsync: uncached %lld dirty %lld\n",
			(long long)atomic_load(&c->uncached), (long long)atomic_load(&c->dirty));
	CHECK(pc_size(h) == (off_t)size);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, model, size));
	CHECK(pc_cache_destroy(c) == 0);
	free(model);
	free(buf);
	free(back);
}
