/*
 * test_mt_release.c - two users of a drop-behind folio let go at the same
 * moment: exactly one of them is its last user, and the folio leaves the
 * cache (reclaim.c, folio_release).
 *
 * Set-up, per round of ROUND folios: an uncached write (PC_DONTCACHE) of
 * one block each, two extra references taken on every folio (as a reader
 * and a write-back walk would hold them), then fsync: each folio's
 * write-back ends while it is held, so the completion leaves it marked
 * PF_DROP_PENDING for whoever lets go last.  Then two threads let go of
 * one reference each, folio by folio, starting together at every folio
 * (a spin barrier).  Checks: no folio of the round is still cached, the
 * cache holds no drop-behind bytes, and the data reads back right.
 *
 * Why it can fail: a release that read the count and then decremented it
 * apart let both threads see the other's reference (count 3), neither
 * dropped, and the folio stayed cached after fsync, which an uncached
 * writer must not see (pcfs_interleaved found it: "4096 bytes still
 * cached after fsync").  With that code this test finds such folios in
 * a few hundred rounds of 2 threads on 2 cores; it runs ROUNDS.
 */
#include "testutil.h"
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>

#define ROUND 256
#define ROUNDS_FULL 48
#define ROUNDS_QUICK 12
#define BS 4096

struct shared {
	struct pc_cache *c;
	struct pc_folio *held[2][ROUND];
	_Atomic unsigned arrived[ROUND]; /* per folio: threads at its barrier */
};

/* Both threads at folio i's barrier, then both let go at once. */
static void *releaser(void *arg)
{
	struct shared *s = ((void **)arg)[0];
	int me = (int)(intptr_t)((void **)arg)[1];
	for (int i = 0; i < ROUND; i++) {
		atomic_fetch_add(&s->arrived[i], 1);
		while (atomic_load(&s->arrived[i]) < 2)
			;
		folio_release(s->c, s->held[me][i]);
	}
	return NULL;
}

static unsigned cached_of_round(struct pc_file *h, uint64_t base)
{
	unsigned n = 0;
	for (int i = 0; i < ROUND; i++) {
		struct pc_folio *f = mapping_lookup(h->m, base + (uint64_t)i * BS);
		if (f) {
			n++;
			folio_release(h->m->c, f);
		}
	}
	return n;
}

int main(void)
{
	tu_watchdog("test_mt_release", 600);
	const char *dir = test_dir("mt_release");
	char path[4096];
	test_path(path, sizeof(path), dir, "f");
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 64ull << 20;
	cfg.block_size = BS;
	cfg.max_folio_size = BS; /* a folio per block: one write, one folio */
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	static struct shared s;
	s.c = c;
	uint8_t buf[BS], back[BS];
	unsigned rounds = tu_quick() ? ROUNDS_QUICK : ROUNDS_FULL, left = 0, bad_data = 0;
	for (unsigned r = 0; r < rounds; r++) {
		uint64_t base = (uint64_t)r * ROUND * BS;
		for (int i = 0; i < ROUND; i++) {
			uint64_t off = base + (uint64_t)i * BS;
			tu_fill_pattern(buf, BS, r, off);
			REQUIRE(pc_pwrite(h, buf, BS, (off_t)off, PC_DONTCACHE) == BS);
			s.held[0][i] = mapping_lookup(h->m, off);
			s.held[1][i] = mapping_lookup(h->m, off);
			REQUIRE(s.held[0][i] && s.held[0][i] == s.held[1][i]);
			atomic_store(&s.arrived[i], 0);
		}
		REQUIRE(pc_fsync(h) == 0);
		pthread_t t[2];
		void *args[2][2] = { { &s, (void *)0 }, { &s, (void *)1 } };
		for (int k = 0; k < 2; k++)
			REQUIRE(pthread_create(&t[k], NULL, releaser, args[k]) == 0);
		for (int k = 0; k < 2; k++)
			pthread_join(t[k], NULL);
		left += cached_of_round(h, base);
		for (int i = 0; i < ROUND; i += 37) {
			uint64_t off = base + (uint64_t)i * BS;
			tu_fill_pattern(buf, BS, r, off);
			if (pc_pread(h, back, BS, (off_t)off, PC_DONTCACHE) != BS || memcmp(back, buf, BS))
				bad_data++;
		}
	}
	printf("   %u rounds of %d folios released by two users at once: %u left cached\n", rounds, ROUND, left);
	CHECK(left == 0);
	CHECK(bad_data == 0);
	struct pc_stats st = tu_stats(c);
	CHECK(st.dirty_uncached_bytes == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	test_rmdir(dir);
	return test_done();
}
