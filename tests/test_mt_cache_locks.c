/*
 * test_mt_cache_locks.c - the cache's locks are the shared locks of
 * src/lib/shlock.h (docs/shared.md, section 15), owned by the process's
 * slot in the cache's segment, with the behaviour the cache relies on.
 *
 *   - locks_are_owned_by_the_cache_slot: a cache mutex taken through
 *     cache_lock names the process's slot (the locker set up at
 *     pc_cache_new, from the segment) and this thread; a file's
 *     inval_lock taken shared counts one read hold for that slot, taken
 *     exclusively names the slot as its writer; the one unlock call
 *     releases each kind, and every lock is free after.
 *   - inval_lock_lets_readers_past_a_waiting_writer: while a reader holds
 *     a file's inval_lock and a truncate waits for it, a new reader gets
 *     it (the lock prefers readers, as glibc's rwlock did); once the
 *     readers go, the truncate runs;
 *   - write_span_thread_reads_and_writes_while_truncate_waits: a thread
 *     holding a write span (and with it the file's inval_lock) reads a
 *     range not cached and writes another folio of the same file while a
 *     truncate waits for the span: both return (a writer-preferring lock
 *     deadlocked here), and the truncate runs after the span ends.
 *   - throttle_waiters_wake_in_order: with write-back held at a gate,
 *     four writers queue in the throttle at the dirty limit, sleeping on
 *     their futex words; the gate opens and each is woken and let
 *     through (every write returns, the queue ends empty, all data
 *     reads back), and some waits ended by the wake of the waiter ahead
 *     (each also ends by a 20 ms timeout, which would hide a lost wake).
 */
#include "testutil.h"

#include "api/internal.h"
#include "wb/throttle.h"

#include <pthread.h>

static const char *dir;

static void cache_locks_setup(void)
{
	tu_exit_guard();
	dir = test_dir("mt_cache_locks");
}

static void cache_locks_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(cache_locks_setup, cache_locks_teardown)

static struct pc_file *open_file(struct pc_cache *c, const char *name)
{
	return tu_open_new(c, dir, name);
}

static int word_owner(_Atomic uint32_t *word)
{
	return shlock_word_owner(atomic_load(word));
}

TEST_CASE(locks_are_owned_by_the_cache_slot)
{
	struct pc_cache *c = tu_cache_of(16ull << 20);
	struct pc_file *h = open_file(c, "owned");
	struct pc_mapping *m = h->m;
	const struct pc_shlock_ctx *cx = cache_lockcx(c);
	int self = (int)cx->self;

	REQUIRE(cx->slots != NULL);
	CHECK(word_owner(&c->lru_lock.word) == -1);
	cache_lock(c, &c->lru_lock, LOCK_LEAF);
	CHECK(word_owner(&c->lru_lock.word) == self);
	CHECK(shmutex_held(&c->lru_lock, cx));
	cache_unlock(c, &c->lru_lock);
	CHECK(word_owner(&c->lru_lock.word) == -1);
	CHECK(!shmutex_held(&c->lru_lock, cx));

	files_lock(c);
	CHECK(word_owner(&c->files_lock.word) == self);
	files_unlock(c);
	CHECK(word_owner(&c->files_lock.word) == -1);

	/* The file's locks point at the same locker. */
	CHECK(m->lockcx == cx);
	inval_lock_shared(m);
	CHECK(shrwlock_readers(&m->inval_lock, (unsigned)self) == 1);
	CHECK(word_owner(&m->inval_lock.word) == -1);
	inval_unlock(m);
	CHECK(shrwlock_readers(&m->inval_lock, (unsigned)self) == 0);

	inval_lock_excl(m);
	CHECK(word_owner(&m->inval_lock.word) == self);
	CHECK(shrwlock_wrheld(&m->inval_lock, cx));
	CHECK(shrwlock_readers(&m->inval_lock, (unsigned)self) == 0);
	inval_unlock(m);
	CHECK(word_owner(&m->inval_lock.word) == -1);

	tree_lock_excl(m);
	CHECK(shrwlock_wrheld(&m->tree_lock, cx));
	tree_unlock(m);
	tree_lock_shared(m);
	CHECK(shrwlock_readers(&m->tree_lock, (unsigned)self) == 1);
	tree_unlock(m);
	CHECK(shrwlock_readers(&m->tree_lock, (unsigned)self) == 0);
	CHECK(word_owner(&m->tree_lock.word) == -1);

	/* The data path leaves every lock as it found it. */
	char buf[5000];
	memset(buf, 'x', sizeof(buf));
	REQUIRE(pc_pwrite(h, buf, sizeof(buf), 100, 0) == (ssize_t)sizeof(buf));
	REQUIRE(pc_ftruncate(h, 3000) == 0);
	REQUIRE(pc_fsync(h) == 0);
	CHECK(shrwlock_readers(&m->inval_lock, (unsigned)self) == 0);
	CHECK(shrwlock_readers(&m->tree_lock, (unsigned)self) == 0);
	CHECK(word_owner(&m->inval_lock.word) == -1);
	CHECK(word_owner(&m->size_lock.word) == -1);
	CHECK(word_owner(&c->throttle_lock.word) == -1);
	REQUIRE(pc_close(h) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}

struct truncator {
	struct pc_file *h;
	_Atomic bool done;
};

static void *truncate_thread(void *arg)
{
	struct truncator *t = arg;
	REQUIRE(pc_ftruncate(t->h, 0) == 0);
	atomic_store(&t->done, true);
	return NULL;
}

/* Another thread's read of inval_lock, which a writer waits for: it gets
 * in without waiting (a try) and lets go. */
static void *second_reader(void *arg)
{
	struct pc_mapping *m = arg;
	bool got = inval_trylock_shared(m);
	if (got)
		inval_unlock(m);
	return (void *)(uintptr_t)got;
}

TEST_CASE(inval_lock_lets_readers_past_a_waiting_writer)
{
	struct pc_cache *c = tu_cache_of(16ull << 20);
	struct pc_file *h = open_file(c, "writer");
	struct pc_mapping *m = h->m;
	char buf[8192];
	memset(buf, 'w', sizeof(buf));
	REQUIRE(pc_pwrite(h, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));

	inval_lock_shared(m);
	struct truncator t = { .h = h };
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, truncate_thread, &t) == 0);
	/* The truncate takes the writer word, then waits for the read hold. */
	for (int i = 0; i < 10000 && word_owner(&m->inval_lock.word) == -1; i++)
		usleep(1000);
	REQUIRE(word_owner(&m->inval_lock.word) == (int)cache_lockcx(c)->self);
	CHECK(!atomic_load(&t.done));
	/* A new reader (another thread: one thread takes it once, as the
	 * checking builds' record wants) gets in while the writer waits. */
	pthread_t rd;
	void *got = NULL;
	REQUIRE(pthread_create(&rd, NULL, second_reader, m) == 0);
	REQUIRE(pthread_join(rd, &got) == 0);
	CHECK(got != NULL);
	CHECK(!atomic_load(&t.done));
	inval_unlock(m);
	REQUIRE(pthread_join(th, NULL) == 0);
	CHECK(atomic_load(&t.done));
	CHECK(word_owner(&m->inval_lock.word) == -1);
	/* Readers get it again after the writer. */
	REQUIRE(inval_trylock_shared(m));
	inval_unlock(m);
	CHECK(pc_pread(h, buf, sizeof(buf), 0, 0) == 0); /* truncated to 0 */
	REQUIRE(pc_close(h) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}

TEST_CASE(write_span_thread_reads_and_writes_while_truncate_waits)
{
	struct pc_cache *c = tu_cache_of(16ull << 20);
	struct pc_file *h = open_file(c, "span");
	/* 1 MiB on the device, nothing of it cached past the first folio. */
	static char buf[1 << 20];
	memset(buf, 's', sizeof(buf));
	REQUIRE(pc_pwrite(h, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	REQUIRE(pc_fsync(h) == 0);
	REQUIRE(pc_fadvise(h, 0, 0, POSIX_FADV_DONTNEED) == 0);
	struct pc_span sp;
	REQUIRE(pc_write_begin(h, 0, 100, 0, &sp) == 100);
	struct truncator t = { .h = h };
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, truncate_thread, &t) == 0);
	struct pc_mapping *m = h->m;
	CHECK(TU_POLL(shlock_word_owner(atomic_load(&m->inval_lock.word)) >= 0, 10000));
	/* The span's thread uses the file while the truncate waits for it. */
	char got[4096];
	CHECK(pc_pread(h, got, sizeof(got), 768 << 10, 0) == (ssize_t)sizeof(got));
	CHECK(got[0] == 's' && got[sizeof(got) - 1] == 's');
	CHECK(pc_pwrite(h, "w", 1, 900 << 10, 0) == 1);
	CHECK(!atomic_load(&t.done));
	memset(sp.data, 'x', 100);
	REQUIRE(pc_write_end(&sp, 100) == 0);
	REQUIRE(pthread_join(th, NULL) == 0);
	CHECK(pc_size(h) == 0);
	REQUIRE(pc_close(h) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}

enum { WRITERS = 4, WRITES = 64, RECORD = 64 << 10 };

/* Device writes wait here while it is closed, so that write-back cleans
 * nothing and the writers are sure to queue at the dirty limit. */
static _Atomic bool gate_closed;

static int gate_hook(void *arg, int op, int fd, off_t off, size_t len)
{
	(void)arg, (void)fd, (void)off, (void)len;
	while (op == IO_WRITE && atomic_load(&gate_closed))
		usleep(1000);
	return 0;
}

struct writer {
	struct pc_file *h;
	int id;
};

static void *writer_thread(void *arg)
{
	struct writer *w = arg;
	char *buf = malloc(RECORD);
	REQUIRE(buf);
	memset(buf, 'a' + w->id, RECORD);
	for (int i = 0; i < WRITES; i++) {
		off_t off = ((off_t)i * WRITERS + w->id) * RECORD;
		REQUIRE(pc_pwrite(w->h, buf, RECORD, off, 0) == RECORD);
	}
	free(buf);
	return NULL;
}

TEST_CASE(throttle_waiters_wake_in_order)
{
	/* A 4 MiB dirty limit, 16 MiB written by four threads in writes too
	 * small to be paced, and write-back held at a gate: all four queue in
	 * the throttle.  The gate opens; the first is let through by the
	 * write-back's progress, each of the others by the futex word the
	 * one before it bumps. */
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 32ull << 20;
	cfg.dirty_limit_bytes = 4ull << 20;
	cfg.dirty_background_bytes = 1ull << 20;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	struct pc_file *h = open_file(c, "throttled");
	atomic_store(&gate_closed, true);
	cache_proc(c)->fault_hook = gate_hook;
	struct writer w[WRITERS];
	pthread_t th[WRITERS];
	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){ h, i };
		REQUIRE(pthread_create(&th[i], NULL, writer_thread, &w[i]) == 0);
	}
	int n = 0;
	for (int i = 0; i < 20000 && (n = (int)throttle_queue_length(c)) < WRITERS; i++)
		usleep(1000);
	CHECK(n == WRITERS);
	atomic_store(&gate_closed, false);
	for (int i = 0; i < WRITERS; i++)
		REQUIRE(pthread_join(th[i], NULL) == 0);
	struct pc_stats st;
	pc_cache_stats(c, &st);
	CHECK(st.throttle_waits >= WRITERS);
	/* Waiters behind others were woken by the one ahead, not only let
	 * go by their timeouts (which would hide a lost wake-up). */
	CHECK(atomic_load(&c->st_throttle_woken) > 0);
	printf("throttle waits %llu, woken by the one ahead %llu\n", (unsigned long long)st.throttle_waits,
	       (unsigned long long)atomic_load(&c->st_throttle_woken));
	CHECK(throttle_queue_length(c) == 0);
	CHECK(atomic_load(&c->throttle_head_vtime) == UINT64_MAX);
	char *buf = malloc(RECORD);
	REQUIRE(buf);
	for (int i = 0; i < WRITES * WRITERS; i++) {
		REQUIRE(pc_pread(h, buf, RECORD, (off_t)i * RECORD, 0) == RECORD);
		CHECK(buf[0] == 'a' + i % WRITERS && buf[RECORD - 1] == 'a' + i % WRITERS);
	}
	free(buf);
	REQUIRE(pc_close(h) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}
