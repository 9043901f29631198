/*
 * test_mt_shlock.c - the shared locks of src/lib/shlock.h with threads
 * acting as processes, a slot each: how the TSan builds will run shared
 * caches, since ThreadSanitizer cannot follow processes.
 *
 *   - threads_as_slots_share_plain_data: threads of four slots contend on
 *     a shmutex (lock, lock_spin, trylock) and a shrwlock (read, write,
 *     try both, and the mutex nested in the write lock), through the
 *     noted wrappers, guarding plain memory: counters that must come out
 *     exact, and a pair that no reader may see torn.  Holders now and then
 *     sleep holding the lock, so that the others go past the spin and
 *     sleep on the futex (the case checks that they did).  Under TSan the
 *     case must be clean: the annotations order each holder after the
 *     previous one as a mutex would.
 *   - threads_as_slots_share_plain_data_prefer_readers: the same with a
 *     counted lock whose readers pass a waiting writer
 *     (shrwlock_init_prefer_readers, the SHLOCK_DRAINED handshake);
 *   - readers_pass_a_waiting_writer: with a reader holding the lock and a
 *     writer waiting, a reader-preferring lock lets the same slot read
 *     again and another slot read; a writer-preferring one refuses the
 *     new reader; the writer gets the lock once the reads are gone;
 *   - backed_off_reader_waits_for_the_bit_not_the_writer: a reader that
 *     backed off from SHLOCK_DRAINED gets in once the bit goes, while
 *     the writer still waits;
 *   - prefer_readers_writer_excludes_readers: a reader-preferring lock's
 *     writer holds it exclusively (SHLOCK_DRAINED set), a failed try of
 *     the write lock leaves no bit behind.
 *   - tsan_sees_bugs_under_shared_locks (TSan builds only): the annotations
 *     matter.  The program runs itself twice with a bug planted: two
 *     readers writing one variable under a read lock, and two mutexes
 *     taken in both orders.  TSan must report a data race naming the read
 *     lock, and a lock-order inversion.  Without the annotations
 *     (-DPC_SHLOCK_TSAN=0) it reports neither: the lock's own atomics
 *     order the two readers (their counts share a word), and TSan sees no
 *     lock at all.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "lib/shlock.h"
#include "lib/slots.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

static void mt_shlock_setup(void)
{
	tu_exit_guard();
}

TEST_FIXTURE(mt_shlock_setup, NULL)

enum { THREADS = 4 };

/* What the slots share: in a MAP_SHARED mapping, as a segment would be. */
struct area {
	struct pc_slots slots;
	struct pc_shmutex mutex;
	struct pc_shrwlock rw;
	uint64_t counter; /* under the mutex: plain memory */
	uint64_t pair[2]; /* under the write lock: equal to readers */
	uint64_t nested;  /* under the write lock and the mutex */
	_Atomic int go;
	_Atomic uint64_t bad_reads, not_held, mutex_slept, rw_slept;
};

static struct area *area_new_as(bool prefer_readers)
{
	struct area *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(a != MAP_FAILED);
	slots_init(&a->slots);
	shmutex_init(&a->mutex);
	if (prefer_readers)
		shrwlock_init_prefer_readers(&a->rw);
	else
		shrwlock_init(&a->rw);
	return a;
}

static struct area *area_new(void)
{
	return area_new_as(false);
}

/* A thread as a process: its own slot and pidfds. */
struct slot_thread {
	struct area *a;
	pthread_t thread;
	uint64_t seed;
	int iters;
	struct pc_slot_peers peers;
	struct pc_shlock_ctx cx;
	/* what it did, for the totals */
	uint64_t bumps, writes, nested;
};

static void slot_attach(struct slot_thread *t)
{
	slots_peers_init(&t->peers);
	int s = slots_claim(&t->a->slots);
	REQUIRE(s >= 0);
	t->cx = (struct pc_shlock_ctx){ .slots = &t->a->slots, .peers = &t->peers, .self = (unsigned)s };
}

static void slot_detach(struct slot_thread *t)
{
	slots_release(&t->a->slots, t->cx.self);
	slots_peers_destroy(&t->peers);
}

/* A plain read-modify-write, torn by any other holder's step in between;
 * with `nap`, the holder sleeps in it, so that the others try the lock and
 * go to sleep on its word meanwhile. */
static void bump(uint64_t *v, bool nap)
{
	uint64_t x = *v;
	if (nap)
		usleep(100);
	*v = x + 1;
}

/* The word has sleepers (they got past any spin). */
static bool sleepers(_Atomic uint32_t *word)
{
	return atomic_load_explicit(word, memory_order_relaxed) & SHLOCK_WAITERS;
}

static void mutex_round(struct slot_thread *t, uint64_t r, bool nap)
{
	struct area *a = t->a;
	int got;
	switch (r % 3) {
	case 0:
		got = noted_shmutex_lock(&a->mutex, &t->cx, LOCK_LEAF);
		break;
	case 1:
		got = noted_shmutex_lock_spin(&a->mutex, &t->cx, LOCK_LEAF);
		break;
	default:
		while ((got = noted_shmutex_trylock(&a->mutex, &t->cx, LOCK_LEAF)) == -EBUSY)
			sched_yield();
		break;
	}
	REQUIRE(got == 0);
	if (!shmutex_held(&a->mutex, &t->cx))
		atomic_fetch_add(&a->not_held, 1);
	bump(&a->counter, nap);
	if (sleepers(&a->mutex.word))
		atomic_store(&a->mutex_slept, 1);
	noted_shmutex_unlock(&a->mutex, &t->cx);
	t->bumps++;
}

static void write_round(struct slot_thread *t, uint64_t r, bool nap)
{
	struct area *a = t->a;
	if (r % 4 == 0) {
		if (noted_shrwlock_trywrlock(&a->rw, &t->cx, LOCK_TREE) == -EBUSY)
			return;
	} else {
		REQUIRE(noted_shrwlock_wrlock(&a->rw, &t->cx, LOCK_TREE) == 0);
	}
	if (!shrwlock_wrheld(&a->rw, &t->cx))
		atomic_fetch_add(&a->not_held, 1);
	a->pair[0]++;
	if (nap)
		usleep(100);
	a->pair[1]++;
	if (r % 8 == 1) { /* the mutex inside the write lock: the order's way */
		REQUIRE(noted_shmutex_lock_spin(&a->mutex, &t->cx, LOCK_LEAF) == 0);
		bump(&a->nested, false);
		noted_shmutex_unlock(&a->mutex, &t->cx);
		t->nested++;
	}
	if (sleepers(&a->rw.word))
		atomic_store(&a->rw_slept, 1);
	noted_shrwlock_wrunlock(&a->rw, &t->cx);
	t->writes++;
}

static void read_round(struct slot_thread *t, uint64_t r, bool nap)
{
	struct area *a = t->a;
	if (r % 4 == 0) {
		if (noted_shrwlock_tryrdlock(&a->rw, &t->cx, LOCK_TREE) == -EBUSY)
			return;
	} else {
		REQUIRE(noted_shrwlock_rdlock(&a->rw, &t->cx, LOCK_TREE) == 0);
	}
	uint64_t x = a->pair[0];
	if (nap)
		usleep(20);
	if (a->pair[1] != x)
		atomic_fetch_add(&a->bad_reads, 1);
	noted_shrwlock_rdunlock(&a->rw, &t->cx);
}

static void *slot_main(void *arg)
{
	struct slot_thread *t = arg;
	slot_attach(t);
	uint64_t rng = 0x9e3779b97f4a7c15ull * t->seed;
	while (!atomic_load(&t->a->go))
		sched_yield();
	for (int i = 0; i < t->iters; i++) {
		uint64_t r = tu_rand(&rng);
		bool nap = r % 61 == 0;
		switch ((r >> 8) % 8) {
		case 0: case 1: case 2:
			mutex_round(t, r >> 16, nap);
			break;
		case 3: case 4:
			write_round(t, r >> 16, nap);
			break;
		default:
			read_round(t, r >> 16, nap);
			break;
		}
	}
	slot_detach(t);
	return NULL;
}

static void threads_as_slots(bool prefer_readers)
{
	const int iters = TU_TSAN ? 10000 : 20000;
	uint64_t seed = test_seed(tu_case_name(), 0x73686c6f636bull);
	struct area *a = area_new_as(prefer_readers);
	struct slot_thread t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		t[i] = (struct slot_thread){ .a = a, .seed = seed * THREADS + (uint64_t)i + 1, .iters = iters };
		REQUIRE(pthread_create(&t[i].thread, NULL, slot_main, &t[i]) == 0);
	}
	atomic_store(&a->go, 1);
	uint64_t bumps = 0, writes = 0, nested = 0;
	for (int i = 0; i < THREADS; i++) {
		REQUIRE(pthread_join(t[i].thread, NULL) == 0);
		bumps += t[i].bumps;
		writes += t[i].writes;
		nested += t[i].nested;
	}
	printf("%llu mutex rounds, %llu writes (%llu nested), sleepers seen: mutex %d, rwlock %d\n",
	       (unsigned long long)bumps, (unsigned long long)writes, (unsigned long long)nested,
	       (int)atomic_load(&a->mutex_slept), (int)atomic_load(&a->rw_slept));
	CHECK(a->counter == bumps);
	CHECK(a->pair[0] == writes && a->pair[1] == writes);
	CHECK(a->nested == nested);
	CHECK(atomic_load(&a->bad_reads) == 0);
	CHECK(atomic_load(&a->not_held) == 0);
	/* The holders' naps made the others sleep on both words. */
	CHECK(atomic_load(&a->mutex_slept));
	CHECK(atomic_load(&a->rw_slept));
	CHECK(atomic_load(&a->mutex.word) == 0 && atomic_load(&a->rw.word) == 0);
	munmap(a, sizeof(*a));
}

TEST_CASE(threads_as_slots_share_plain_data)
{
	threads_as_slots(false);
}

/* The same with a lock whose readers pass a waiting writer (the
 * SHLOCK_DRAINED handshake instead of the owner). */
TEST_CASE(threads_as_slots_share_plain_data_prefer_readers)
{
	threads_as_slots(true);
}

/* A thread of a slot of its own that takes the counted lock once (for
 * writing: and sets the pair to 7), then says it is done. */
struct one_lock {
	struct area *a;
	bool write;
	pthread_t thread;
	_Atomic int done;
};

static void *one_lock_main(void *arg)
{
	struct one_lock *o = arg;
	struct slot_thread t = { .a = o->a };
	slot_attach(&t);
	if (o->write) {
		REQUIRE(shrwlock_wrlock(&o->a->rw, &t.cx) == 0);
		o->a->pair[0] = o->a->pair[1] = 7;
		shrwlock_wrunlock(&o->a->rw, &t.cx);
	} else {
		REQUIRE(shrwlock_rdlock(&o->a->rw, &t.cx) == 0);
		shrwlock_rdunlock(&o->a->rw, &t.cx);
	}
	atomic_store(&o->done, 1);
	slot_detach(&t);
	return NULL;
}

/* A reader holds a reader-preferring lock and a writer waits for it:
 * the reader takes it again (as a write span's thread reads its own file
 * while a truncate waits), and a reader of another slot gets it too;
 * once every read hold is gone the writer has it, and while it does
 * (SHLOCK_DRAINED) readers are refused.  A writer-preferring lock refuses
 * the new reader as soon as the writer waits. */
TEST_CASE(readers_pass_a_waiting_writer)
{
	for (int prefer = 0; prefer < 2; prefer++) {
		struct area *a = area_new_as(prefer);
		struct slot_thread r1 = { .a = a }, r2 = { .a = a };
		slot_attach(&r1);
		slot_attach(&r2);
		REQUIRE(shrwlock_rdlock(&a->rw, &r1.cx) == 0);
		struct one_lock w = { .a = a, .write = true };
		REQUIRE(pthread_create(&w.thread, NULL, one_lock_main, &w) == 0);
		CHECK(TU_POLL(shlock_word_owner(atomic_load(&a->rw.word)) >= 0, 10000));
		CHECK(!atomic_load(&w.done));
		if (prefer) {
			REQUIRE(shrwlock_rdlock(&a->rw, &r1.cx) == 0); /* again: no wait */
			CHECK(shrwlock_readers(&a->rw, r1.cx.self) == 2);
			CHECK(shrwlock_tryrdlock(&a->rw, &r2.cx) == 0);
			shrwlock_rdunlock(&a->rw, &r2.cx);
			shrwlock_rdunlock(&a->rw, &r1.cx);
		} else {
			CHECK(shrwlock_tryrdlock(&a->rw, &r2.cx) == -EBUSY);
		}
		CHECK(!atomic_load(&w.done));
		shrwlock_rdunlock(&a->rw, &r1.cx);
		REQUIRE(pthread_join(w.thread, NULL) == 0);
		CHECK(a->pair[0] == 7 && a->pair[1] == 7);
		CHECK(atomic_load(&a->rw.word) == 0);
		REQUIRE(shrwlock_tryrdlock(&a->rw, &r2.cx) == 0);
		shrwlock_rdunlock(&a->rw, &r2.cx);
		slot_detach(&r1);
		slot_detach(&r2);
		munmap(a, sizeof(*a));
	}
}

/* A reader of a reader-preferring lock that backed off from
 * SHLOCK_DRAINED waits only for the bit, not for the writer: a writer
 * that set the bit, saw a reader come past and took the bit back lets the
 * reader in while it still waits (the reader that came past may be
 * waiting for this one).  The writer's steps are played by hand here:
 * the word names a live slot with the bit set, then the bit goes. */
TEST_CASE(backed_off_reader_waits_for_the_bit_not_the_writer)
{
	struct area *a = area_new_as(true);
	struct slot_thread w = { .a = a };
	slot_attach(&w);
	atomic_store(&a->rw.word, (w.cx.self + 1) | SHLOCK_DRAINED);
	struct one_lock r = { .a = a, .write = false };
	REQUIRE(pthread_create(&r.thread, NULL, one_lock_main, &r) == 0);
	CHECK(TU_POLL(atomic_load(&a->rw.word) & SHLOCK_WAITERS, 10000)); /* it sleeps */
	CHECK(!atomic_load(&r.done));
	if (atomic_fetch_and(&a->rw.word, ~SHLOCK_DRAINED) & SHLOCK_WAITERS)
		shfutex_wake(&a->rw.word, INT_MAX);
	/* In while the word still names the writer. */
	CHECK(TU_POLL(atomic_load(&r.done), 10000));
	CHECK(shlock_word_owner(atomic_load(&a->rw.word)) == (int)w.cx.self);
	REQUIRE(pthread_join(r.thread, NULL) == 0);
	atomic_store(&a->rw.word, 0);
	slot_detach(&w);
	munmap(a, sizeof(*a));
}

/* While a reader-preferring lock's writer holds it, readers are refused
 * (and wait), and they get it when it goes. */
TEST_CASE(prefer_readers_writer_excludes_readers)
{
	struct area *a = area_new_as(true);
	struct slot_thread wr = { .a = a }, rd = { .a = a };
	slot_attach(&wr);
	slot_attach(&rd);
	REQUIRE(shrwlock_wrlock(&a->rw, &wr.cx) == 0);
	CHECK(atomic_load(&a->rw.word) & SHLOCK_DRAINED);
	CHECK(shrwlock_tryrdlock(&a->rw, &rd.cx) == -EBUSY);
	CHECK(shrwlock_readers(&a->rw, rd.cx.self) == 0);
	shrwlock_wrunlock(&a->rw, &wr.cx);
	CHECK(!(atomic_load(&a->rw.word) & SHLOCK_DRAINED));
	CHECK(shrwlock_tryrdlock(&a->rw, &rd.cx) == 0);
	/* A try of the write lock under a read hold fails and leaves no bit. */
	CHECK(shrwlock_trywrlock(&a->rw, &wr.cx) == -EBUSY);
	CHECK(atomic_load(&a->rw.word) == 0);
	shrwlock_rdunlock(&a->rw, &rd.cx);
	CHECK(shrwlock_trywrlock(&a->rw, &wr.cx) == 0);
	shrwlock_wrunlock(&a->rw, &wr.cx);
	slot_detach(&wr);
	slot_detach(&rd);
	munmap(a, sizeof(*a));
}

/* ------------------------------------------------- the planted bugs */

#define PLANT_ENV "PC_MT_SHLOCK_PLANT"

struct plant {
	struct area *a;
	int which;  /* 0: writes under a read lock; 1: mutexes in both orders */
	int second; /* this thread goes second */
	pthread_t thread;
};

static struct pc_shmutex other_mutex;

static void *plant_main(void *arg)
{
	struct plant *p = arg;
	struct slot_thread t = { .a = p->a };
	slot_attach(&t);
	if (p->second) /* after the first one is done: no overlap in time */
		usleep(100000);
	if (p->which == 0) {
		REQUIRE(shrwlock_rdlock(&p->a->rw, &t.cx) == 0);
		p->a->counter++; /* the bug: a write under a read lock */
		shrwlock_rdunlock(&p->a->rw, &t.cx);
	} else {
		struct pc_shmutex *x = p->second ? &other_mutex : &p->a->mutex;
		struct pc_shmutex *y = p->second ? &p->a->mutex : &other_mutex;
		REQUIRE(shmutex_lock(x, &t.cx) == 0);
		REQUIRE(shmutex_lock(y, &t.cx) == 0);
		shmutex_unlock(y, &t.cx);
		shmutex_unlock(x, &t.cx);
	}
	usleep(200000); /* the slot stays claimed until both are done */
	slot_detach(&t);
	return NULL;
}

/* In the child that the case below runs: plant bug `which`, then exit;
 * TSan's exit status says whether it reported anything. */
static _Noreturn void plant(int which)
{
	struct area *a = area_new();
	shmutex_init(&other_mutex);
	struct plant p[2];
	for (int i = 0; i < 2; i++) {
		p[i] = (struct plant){ .a = a, .which = which, .second = i };
		REQUIRE(pthread_create(&p[i].thread, NULL, plant_main, &p[i]) == 0);
	}
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_join(p[i].thread, NULL) == 0);
	exit(0);
}

/* Run this program's case `name` with PLANT_ENV=which; returns its exit
 * status and leaves what it said (stdout, stderr) in *said. */
static int run_planted(const char *name, int which, char *said, size_t size)
{
	int out = memfd_create("mt_shlock-stderr", MFD_CLOEXEC);
	REQUIRE(out >= 0);
	pid_t pid = tu_fork(120);
	if (pid == 0) {
		char env[64], self[4096];
		snprintf(env, sizeof(env), PLANT_ENV "=%d", which);
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 || putenv(env) != 0)
			_exit(100);
		self[n] = '\0';
		execl(self, self, name, (char *)NULL);
		_exit(101);
	}
	int st = tu_wait_child(pid, 150);
	ssize_t n = pread(out, said, size - 1, 0);
	said[n > 0 ? n : 0] = '\0';
	close(out);
	return st;
}

TEST_CASE(tsan_sees_bugs_under_shared_locks)
{
	const char *planted = getenv(PLANT_ENV);
	if (planted)
		plant(atoi(planted));
	if (!TU_TSAN)
		TEST_SKIP_UNSUPPORTED("not a ThreadSanitizer build: nobody to see the bugs");
	static char said[1 << 16];
	/* TSan's exit status is 66 when it reported. */
	CHECK(run_planted(tu_case_name(), 0, said, sizeof(said)) == 66);
	CHECK(strstr(said, "WARNING: ThreadSanitizer: data race") != NULL);
	CHECK(strstr(said, "(mutexes: read M") != NULL); /* both sides under the read lock */
	if (!strstr(said, "data race"))
		fprintf(stderr, "the child said:\n%s\n", said);
	CHECK(run_planted(tu_case_name(), 1, said, sizeof(said)) == 66);
	CHECK(strstr(said, "WARNING: ThreadSanitizer: lock-order-inversion") != NULL);
	if (!strstr(said, "lock-order-inversion"))
		fprintf(stderr, "the child said:\n%s\n", said);
}
