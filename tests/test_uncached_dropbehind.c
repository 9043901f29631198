/*
 * test_uncached_dropbehind.c - the drop-behind mark of uncached
 * (PC_DONTCACHE) I/O, and when a marked folio may go:
 *
 *   - a folio that was cached before an uncached write is not marked
 *     (cached by a buffered write, or by a buffered read);
 *   - a cached access clears the mark; one while the folio is under
 *     writeback keeps it: not dropped when the writeback completes, and
 *     no longer drop-behind then;
 *   - a drop-behind folio dirtied again is not dropped before its data is
 *     written (under writeback or racing the flusher); a folio held by a
 *     reader is not freed, and its last user drops it.
 *
 * Single folios are looked at through mapping_lookup() and the folio
 * flags; a fault hook holds device writes to keep folios under writeback.
 */
#include "uncached_util.h"

#include <pthread.h>

TEST_SCRATCH_DIR("uncached_dropbehind")


/* Fault hook that holds the first device write armed for it (the folios
 * stay under writeback) until released. */
static pthread_mutex_t hk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hk_cv = PTHREAD_COND_INITIALIZER;
static int hk_armed, hk_blocked, hk_release;

static int hold_write_hook(void *arg, int op, int fd, off_t off, size_t len)
{
	(void)arg, (void)fd, (void)off, (void)len;
	if (op != IO_WRITE)
		return 0;
	pthread_mutex_lock(&hk_lock);
	if (hk_armed) {
		hk_armed = 0;
		hk_blocked = 1;
		pthread_cond_broadcast(&hk_cv);
		while (!hk_release)
			pthread_cond_wait(&hk_cv, &hk_lock);
	}
	pthread_mutex_unlock(&hk_lock);
	return 0;
}

static void hook_arm(void)
{
	pthread_mutex_lock(&hk_lock);
	hk_armed = 1;
	hk_blocked = 0;
	hk_release = 0;
	pthread_mutex_unlock(&hk_lock);
}

static bool hook_blocked(void)
{
	pthread_mutex_lock(&hk_lock);
	bool b = hk_blocked;
	pthread_mutex_unlock(&hk_lock);
	return b;
}

static void hook_release(void)
{
	pthread_mutex_lock(&hk_lock);
	hk_armed = 0;
	hk_release = 1;
	pthread_cond_broadcast(&hk_cv);
	pthread_mutex_unlock(&hk_lock);
}

static void *fsync_thread(void *arg)
{
	intptr_t r = pc_fsync(arg);
	return (void *)r;
}

/* A folio cached by a buffered write (dirty still) is not marked by the
 * uncached writes over it, before fsync or after. */
TEST_CASE(folio_cached_by_write_not_marked)
{
	struct pc_cache *c = cache_without_readahead();
	char path[4200];
	uint8_t buf[16384];
	tu_fill_pattern(buf, sizeof(buf), 4, 0);

	struct pc_file *h = open_new(c, dir, "cached_w", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 8192, 0, 0) == 8192);
	tu_fill_pattern(buf + 100, 100, 40, 100);
	CHECK(pc_pwrite(h, buf + 100, 100, 100, PC_DONTCACHE) == 100);
	tu_fill_pattern(buf + 4096, 4096, 41, 4096);
	CHECK(pc_pwrite(h, buf + 4096, 4096, 4096, PC_DONTCACHE) == 4096);
	/* Before fsync too (fsync drops lone edges, which would hide one). */
	uint32_t f0 = fstate(h, 0), f1 = fstate(h, 4096);
	CHECK(f0 != NOT_CACHED && !(f0 & (PF_DROPBEHIND | PF_EDGE)));
	CHECK(f1 != NOT_CACHED && !(f1 & (PF_DROPBEHIND | PF_EDGE)));
	CHECK(pc_fsync(h) == 0);
	f0 = fstate(h, 0);
	f1 = fstate(h, 4096);
	CHECK(f0 != NOT_CACHED && !(f0 & (PF_DROPBEHIND | PF_EDGE)));
	CHECK(f1 != NOT_CACHED && !(f1 & (PF_DROPBEHIND | PF_EDGE)));
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == 8192);
	CHECK(s.edge_kept == 0);
	CHECK(tu_verify_disk(path, buf, 8192));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* A folio cached by a buffered read of existing data (clean) is not
 * marked by an uncached write into it. */
TEST_CASE(folio_cached_by_read_not_marked)
{
	struct pc_cache *c = cache_without_readahead();
	char path[4200];
	uint8_t buf[16384];

	test_path(path, sizeof(path), dir, "cached_r");
	tu_fill_pattern(buf, sizeof(buf), 5, 0);
	tu_write_file(path, buf, 16384);
	struct pc_file *h = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h);
	struct pc_stats s = tu_stats(c);
	uint64_t reads0 = s.dev_read_ios;
	uint8_t back[4096];
	CHECK(pc_pread(h, back, 4096, 4096, 0) == 4096);
	CHECK(memcmp(back, buf + 4096, 4096) == 0);
	tu_fill_pattern(buf + 5000, 100, 50, 5000);
	CHECK(pc_pwrite(h, buf + 5000, 100, 5000, PC_DONTCACHE) == 100);
	uint32_t f1 = fstate(h, 4096);
	CHECK(f1 != NOT_CACHED && !(f1 & (PF_DROPBEHIND | PF_EDGE)));
	CHECK(pc_fsync(h) == 0);
	f1 = fstate(h, 4096);
	CHECK(f1 != NOT_CACHED && !(f1 & (PF_DROPBEHIND | PF_EDGE)));
	s = tu_stats(c);
	CHECK(s.dev_read_ios == reads0 + 1);
	CHECK(s.edge_kept == 0);
	CHECK(tu_verify_disk(path, buf, 16384));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* The cache of the mark's tests: the uncached kick far away (8 MiB) and
 * no read-ahead, the hold_write_hook set before any I/O. */
static struct pc_cache *cache_holding_writes(void)
{
	struct pc_config cfg = no_aging_config(4096);
	cfg.uncached_kick_bytes = 8 * MiB;
	cfg.readahead_max_bytes = 0;
	struct pc_cache *c = tu_cache_new(&cfg);
	cache_proc(c)->fault_hook = hold_write_hook;
	return c;
}

/* A cached read of uncached data before its writeback clears the mark:
 * the fsync then keeps it all cached. */
TEST_CASE(cached_read_clears_dropbehind_mark)
{
	struct pc_cache *c = cache_holding_writes();
	char path[4200];
	const size_t R = 64 * KiB;
	uint8_t *buf = malloc(R), *back = malloc(R);
	REQUIRE(buf && back);

	/* The flusher may clean (and drop) the region between our two
	 * calls; then the read misses and we retry. */
	struct pc_file *h = open_new(c, dir, "mark", path, sizeof(path));
	bool raced = true;
	for (int attempt = 0; attempt < 5 && raced; attempt++) {
		uint64_t off = (uint64_t)attempt * R;
		tu_fill_pattern(buf, R, 60 + (uint64_t)attempt, off);
		struct pc_stats s0 = tu_stats(c);
		CHECK(pc_pwrite(h, buf, R, (off_t)off, PC_DONTCACHE) == (ssize_t)R);
		CHECK(pc_pread(h, back, R, (off_t)off, 0) == (ssize_t)R);
		CHECK(memcmp(back, buf, R) == 0);
		struct pc_stats s1 = tu_stats(c);
		raced = s1.dev_read_ios != s0.dev_read_ios || s1.dropbehind_drops != s0.dropbehind_drops ||
			(fstate(h, off) != NOT_CACHED && (fstate(h, off) & PF_WRITEBACK));
		if (raced) {
			printf("   attempt %d: the flusher dropped it before the read; again\n", attempt);
			continue;
		}
		for (uint64_t p = off; p < off + R; p += 4096) {
			uint32_t fl = fstate(h, p);
			if (fl == NOT_CACHED || (fl & PF_DROPBEHIND)) {
				print_flags("after the cached read", h, p);
				CHECK(0);
				break;
			}
		}
		CHECK(pc_fsync(h) == 0);
		bool all = true;
		for (uint64_t p = off; p < off + R; p += 4096)
			all = all && is_cached(h, p);
		CHECK(all);
	}
	CHECK(!raced);
	CHECK(pc_close(h) == 0);
	cache_proc(c)->fault_hook = NULL;
	CHECK(pc_cache_destroy(c) == 0);
	free(buf);
	free(back);
}

/* While the folio is under writeback: the device write is held by the
 * fault hook, the read is a cache hit.  The mark may stay while the
 * write is in flight, but the access must keep the folio: when the
 * writeback completes it is not dropped, and not drop-behind any more.
 * The control: an uncached folio of the same fsync that nobody read
 * is dropped when its writeback completes. */
TEST_CASE(read_during_writeback_keeps_folio)
{
	struct pc_cache *c = cache_holding_writes();
	char path[4200];
	const size_t R = 64 * KiB;
	uint8_t *back = malloc(R);
	REQUIRE(back);
	struct pc_file *h = open_new(c, dir, "mark_wb", path, sizeof(path));
	const uint64_t ctl = 4 * R; /* the control folio, far from [0, R) */
	uint8_t *model = calloc(1, ctl + R);
	REQUIRE(model);
	tu_fill_pattern(model, R, 70, 0);
	tu_fill_pattern(model + ctl, R, 71, ctl);
	hook_arm();
	CHECK(pc_pwrite(h, model, R, 0, PC_DONTCACHE) == (ssize_t)R);
	CHECK(pc_pwrite(h, model + ctl, R, (off_t)ctl, PC_DONTCACHE) == (ssize_t)R);
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, fsync_thread, h) == 0);
	CHECK(TU_POLL(hook_blocked(), 5000));
	CHECK(TU_POLL(fstate(h, 0) != NOT_CACHED && (fstate(h, 0) & PF_WRITEBACK), 5000));
	struct pc_stats s0 = tu_stats(c);
	CHECK(pc_pread(h, back, R, 0, 0) == (ssize_t)R);
	CHECK(memcmp(back, model, R) == 0);
	struct pc_stats s1 = tu_stats(c);
	CHECK(s1.dev_read_ios == s0.dev_read_ios);
	uint32_t fl = fstate(h, 0);
	CHECK(fl != NOT_CACHED && (fl & PF_WRITEBACK));
	hook_release();
	void *ret;
	pthread_join(t, &ret);
	CHECK(ret == NULL);
	/* PF_WRITEBACK is cleared just before the completion's drop attempt:
	 * wait for that attempt to have decided. */
	CHECK(TU_POLL(fstate(h, 0) == NOT_CACHED || !(fstate(h, 0) & (PF_WRITEBACK | PF_DROPBEHIND)), 2000));
	bool kept = true;
	for (uint64_t p = 0; p < R; p += 4096) {
		fl = fstate(h, p);
		if (fl == NOT_CACHED || (fl & (PF_DROPBEHIND | PF_DIRTY | PF_WRITEBACK))) {
			print_flags("read during writeback, after it", h, p);
			kept = false;
			break;
		}
	}
	CHECK(kept);
	bool ctl_dropped = TU_POLL(!is_cached(h, ctl), 2000);
	if (!ctl_dropped)
		print_flags("control (not read) after writeback", h, ctl);
	CHECK(ctl_dropped);
	CHECK(pc_fsync(h) == 0);
	bool all = true;
	for (uint64_t p = 0; p < R; p += 4096)
		all = all && is_cached(h, p);
	if (!all)
		print_flags("after a second fsync", h, 0);
	CHECK(all);
	CHECK(tu_verify_disk(path, model, ctl + R));
	CHECK(pc_close(h) == 0);
	free(model);
	cache_proc(c)->fault_hook = NULL;
	CHECK(pc_cache_destroy(c) == 0);
	free(back);
}

struct writer_arg {
	struct pc_file *h;
	const uint8_t *buf;
	size_t len;
	off_t off;
	ssize_t ret;
};

static void *writer_thread(void *p)
{
	struct writer_arg *a = p;
	a->ret = pc_pwrite(a->h, a->buf, a->len, a->off, PC_DONTCACHE);
	return NULL;
}

/* The cache of the redirty tests: the flusher kicked at every 64 KiB of
 * uncached data. */
static struct pc_cache *cache_kicked_often(void)
{
	struct pc_config cfg = no_aging_config(4096);
	cfg.uncached_kick_bytes = 64 * KiB;
	return tu_cache_new(&cfg);
}

/* A under writeback (held by the hook), B written over it meanwhile by
 * another thread (which must wait for the writeback), then released: B
 * is read back and reaches the device, nothing stays dirty. */
TEST_CASE(redirtied_during_writeback_not_dropped)
{
	struct pc_cache *c = cache_kicked_often();
	cache_proc(c)->fault_hook = hold_write_hook;
	char path[4200];
	const size_t R = 64 * KiB;
	uint8_t *a = malloc(R), *b = malloc(R), *back = malloc(R);
	REQUIRE(a && b && back);

	struct pc_file *h = open_new(c, dir, "redirty", path, sizeof(path));
	tu_fill_pattern(a, R, 80, 0);
	tu_fill_pattern(b, R, 81, 0);
	hook_arm();
	CHECK(pc_pwrite(h, a, R, 0, PC_DONTCACHE) == (ssize_t)R);
	pthread_t ft, wt;
	REQUIRE(pthread_create(&ft, NULL, fsync_thread, h) == 0);
	CHECK(TU_POLL(hook_blocked(), 5000));
	struct writer_arg wa = { h, b, R, 0, 0 };
	REQUIRE(pthread_create(&wt, NULL, writer_thread, &wa) == 0);
	usleep(20000); /* give the writer time to block (not needed for correctness) */
	hook_release();
	void *ret;
	pthread_join(ft, &ret);
	CHECK(ret == NULL);
	pthread_join(wt, NULL);
	CHECK(wa.ret == (ssize_t)R);
	CHECK(pc_pread(h, back, R, 0, PC_DONTCACHE) == (ssize_t)R);
	CHECK(memcmp(back, b, R) == 0);
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, b, R));
	struct pc_stats s = tu_stats(c);
	CHECK(s.dirty_bytes == 0 && s.dirty_uncached_bytes == 0);
	CHECK(pc_close(h) == 0);
	cache_proc(c)->fault_hook = NULL;
	CHECK(pc_cache_destroy(c) == 0);
	free(a);
	free(b);
	free(back);
}

/* The same region rewritten while the kicked flusher cleans it: every
 * read sees the latest data, the device the last. */
TEST_CASE(rewrites_racing_writeback_read_latest)
{
	struct pc_cache *c = cache_kicked_often();
	char path[4200];
	const size_t R = 64 * KiB;
	uint8_t *a = malloc(R), *b = malloc(R), *back = malloc(R);
	REQUIRE(a && b && back);

	struct pc_file *h = open_new(c, dir, "redirty_loop", path, sizeof(path));
	for (int i = 0; i < 300; i++) {
		tu_fill_pattern(a, R, 100 + (uint64_t)i, 0);
		size_t off = (size_t)(i % 7) * 512, len = R - off - (size_t)(i % 5) * 1000;
		if (pc_pwrite(h, a + off, len, (off_t)off, PC_DONTCACHE) != (ssize_t)len) {
			CHECK(0);
			break;
		}
		memcpy(b + off, a + off, len);
		if (i == 0)
			memcpy(b, a, R);
		if (pc_pread(h, back, R, 0, PC_DONTCACHE) != (ssize_t)R || memcmp(back, b, R) != 0) {
			fprintf(stderr, "   redirty loop: stale data after write %d\n", i);
			CHECK(0);
			break;
		}
		if (i % 50 == 49)
			CHECK(pc_fsync(h) == 0);
	}
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, b, R));
	struct pc_stats s = tu_stats(c);
	CHECK(s.dirty_bytes == 0 && s.dirty_uncached_bytes == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(a);
	free(b);
	free(back);
}

/* A folio held by a reader across the writeback that would drop it: not
 * freed under the reader, dropped by its last user; written and read
 * again after. */
TEST_CASE(folio_held_by_reader_not_freed)
{
	struct pc_cache *c = cache_kicked_often();
	char path[4200];
	uint8_t a[4096], back[4096];

	struct pc_file *h = open_new(c, dir, "held", path, sizeof(path));
	tu_fill_pattern(a, 4096, 90, 0);
	CHECK(pc_pwrite(h, a, 4096, 0, PC_DONTCACHE) == 4096);
	struct pc_folio *f = mapping_lookup(h->m, 0);
	CHECK(f != NULL);
	if (f) {
		CHECK(folio_test(f, PF_DROPBEHIND));
		CHECK(pc_fsync(h) == 0);
		CHECK(folio_test(f, PF_INDEXED));
		CHECK(f->mapping == h->m);
		CHECK(folio_test(f, PF_UPTODATE) && !folio_test(f, PF_DIRTY | PF_WRITEBACK));
		CHECK(memcmp(arena_data(c, f), a, 4096) == 0);
		CHECK(atomic_load(&f->refcount) >= 2);
		CHECK(is_cached(h, 0));
		CHECK(pc_pread(h, back, 4096, 0, PC_DONTCACHE) == 4096);
		CHECK(memcmp(back, a, 4096) == 0);
		CHECK(memcmp(arena_data(c, f), a, 4096) == 0);
		/* Its write-back ended while we held it: the last user to let
		 * go drops it (reclaim_release_folio). */
		CHECK(folio_test(f, PF_DROP_PENDING));
		reclaim_release_folio(c, f);
		CHECK(!is_cached(h, 0));
	}
	tu_fill_pattern(a, 4096, 91, 0);
	CHECK(pc_pwrite(h, a, 4096, 0, PC_DONTCACHE) == 4096);
	CHECK(pc_pread(h, back, 4096, 0, 0) == 4096);
	CHECK(memcmp(back, a, 4096) == 0);
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, a, 4096));
	tu_fill_pattern(a, 4096, 92, 0);
	CHECK(pc_pwrite(h, a, 4096, 0, 0) == 4096);
	CHECK(pc_pread(h, back, 4096, 0, 0) == 4096);
	CHECK(memcmp(back, a, 4096) == 0);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, a, 4096));
	CHECK(pc_cache_destroy(c) == 0);
}

/* folio_put only counts: a plain put by the last user leaves the folio
 * cached, drop pending, for the next user's reclaim_release_folio. */
TEST_CASE(last_put_leaves_drop_pending_for_next_user)
{
	struct pc_cache *c = cache_kicked_often();
	char path[4200];
	uint8_t a[4096], back[4096];

	struct pc_file *h = open_new(c, dir, "held_put", path, sizeof(path));
	tu_fill_pattern(a, 4096, 93, 0);
	CHECK(pc_pwrite(h, a, 4096, 0, PC_DONTCACHE) == 4096);
	struct pc_folio *f = mapping_lookup(h->m, 0);
	CHECK(f != NULL);
	if (f) {
		CHECK(pc_fsync(h) == 0);
		CHECK(folio_test(f, PF_DROP_PENDING));
		folio_put(c, f);
		CHECK(is_cached(h, 0));  /* found it, and as its last user dropped it */
		CHECK(!is_cached(h, 0));
	}
	CHECK(pc_pread(h, back, 4096, 0, 0) == 4096);
	CHECK(memcmp(back, a, 4096) == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}
