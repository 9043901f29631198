/*
 * test_shlock.c - locks shared between processes whose holders may die
 * (src/lib/shlock.h): mutual exclusion across forked processes, an owner
 * SIGKILLed while it holds a mutex or a write lock (another process gets
 * the lock within a second, told -EOWNERDEAD), a reader SIGKILLed while it
 * holds a shared lock (a writer gets in once recovery clears the count),
 * and the robust-mutex cycle: inconsistent until a holder says it is
 * repaired, taken over by recovery.  The spinning mutex excludes and
 * survives its owner's death as the plain one does; the holder's thread id
 * sits beside the word; the noted wrappers keep the lock-order record of
 * check.h (a broken rule aborts a checking build's child).  The same locks
 * with threads as processes, under TSan: test_mt_shlock.c.
 *
 * Each case shares a MAP_SHARED area (or a memfd that each process maps
 * itself, at its own address) with its children; every process, the
 * parent too, claims a slot in it and locks as that slot.
 */
#include "testutil.h"

#include "lib/shlock.h"
#include "lib/slots.h"

#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static void shlock_setup(void)
{
	tu_exit_guard();
}

TEST_FIXTURE(shlock_setup, NULL)

/* What the processes of one case share. */
struct area {
	struct pc_slots slots;
	struct pc_shmutex mutex;
	struct pc_shrwlock rw;
	_Atomic int ready;    /* children that reached their rendezvous */
	_Atomic int go;       /* the parent's word to the children */
	_Atomic int held;     /* a holder child's slot */
	_Atomic int result;   /* what a waiter child's lock call returned (1: not yet) */
	_Atomic uint64_t got_ms;  /* when it returned */
	_Atomic uint64_t kill_ms; /* when the parent sent SIGKILL */
	_Atomic int cleared;  /* the parent cleared a dead reader's count */
	_Atomic int seen_cleared; /* what the writer saw of it once in */
	uint64_t counter;     /* under the mutex, or the write lock: plain memory */
	uint64_t pair[2];     /* under the write lock: always equal to readers */
	_Atomic uint64_t writes, bad_reads;
	_Atomic uint64_t attempts; /* lock calls begun */
	_Atomic int at_door;       /* lock calls not yet returned */
	_Atomic int finished; /* processes done with their loop */
};

static struct area *area_new(void)
{
	struct area *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(a != MAP_FAILED);
	slots_init(&a->slots);
	shmutex_init(&a->mutex);
	shrwlock_init(&a->rw);
	atomic_store(&a->result, 1);
	return a;
}

static void area_free(struct area *a)
{
	munmap(a, sizeof(*a));
}

/* A process as a locker: its slot, its pidfds. */
struct locker {
	struct pc_slot_peers peers;
	struct pc_shlock_ctx cx;
};

static void locker_attach(struct locker *l, struct pc_slots *slots)
{
	slots_peers_init(&l->peers);
	int s = slots_claim(slots);
	REQUIRE(s >= 0);
	l->cx = (struct pc_shlock_ctx){ .slots = slots, .peers = &l->peers, .self = (unsigned)s };
}

static void locker_detach(struct locker *l)
{
	slots_release(l->cx.slots, l->cx.self);
	slots_peers_destroy(&l->peers);
}

/* The plain read-modify-write that a lock must keep whole: torn by any
 * other process's step between the load and the store.  With `nap`, the
 * process sleeps in between, so that the others try the lock meanwhile
 * even on a machine whose CPUs are busy with other work. */
static void bump(uint64_t *counter, bool nap)
{
	uint64_t v = *(volatile uint64_t *)counter;
	if (nap)
		usleep(50);
	for (volatile int i = 0; i < 20; i++)
		;
	*(volatile uint64_t *)counter = v + 1;
}

/* A child that claims a slot, takes the mutex (`what` 0), the write lock
 * (1) or a read lock (2), says so (a->held) and waits to be killed. */
static pid_t spawn_holder(struct area *a, int what)
{
	atomic_store(&a->held, -1);
	pid_t pid = tu_fork(120);
	if (pid == 0) {
		struct locker l;
		locker_attach(&l, &a->slots);
		int r = what == 0 ? shmutex_lock(&a->mutex, &l.cx)
				  : what == 1 ? shrwlock_wrlock(&a->rw, &l.cx) : shrwlock_rdlock(&a->rw, &l.cx);
		REQUIRE(r == 0);
		atomic_store(&a->held, (int)l.cx.self);
		for (;;)
			pause();
	}
	REQUIRE(TU_POLL(atomic_load(&a->held) >= 0, 10000));
	return pid;
}

/* Kill a holder; true once its exit status says SIGKILL. */
static bool kill_holder(struct area *a, pid_t pid)
{
	atomic_store(&a->kill_ms, tu_now_ms());
	REQUIRE(kill(pid, SIGKILL) == 0);
	return tu_wait_child(pid, 60) == 128 + SIGKILL;
}

TEST_CASE(mutex_lock_trylock_unlock)
{
	struct area *a = area_new();
	struct locker one, two; /* two slots of this process, as two processes */
	locker_attach(&one, &a->slots);
	locker_attach(&two, &a->slots);
	CHECK(shmutex_lock(&a->mutex, &one.cx) == 0);
	CHECK(shlock_word_owner(atomic_load(&a->mutex.word)) == (int)one.cx.self);
	CHECK(shmutex_trylock(&a->mutex, &two.cx) == -EBUSY);
	shmutex_unlock(&a->mutex, &one.cx);
	CHECK(atomic_load(&a->mutex.word) == 0);
	CHECK(shmutex_trylock(&a->mutex, &two.cx) == 0);
	CHECK(shlock_word_owner(atomic_load(&a->mutex.word)) == (int)two.cx.self);
	CHECK(shmutex_trylock(&a->mutex, &one.cx) == -EBUSY);
	shmutex_unlock(&a->mutex, &two.cx);
	CHECK(shmutex_lock(&a->mutex, &one.cx) == 0);
	shmutex_unlock(&a->mutex, &one.cx);
	locker_detach(&two);
	locker_detach(&one);
	area_free(a);
}

/* N processes × M increments of a plain counter under the mutex: exactly
 * N × M.  Now and then the holder waits, the lock held, until another
 * process calls lock or waits in it, and a little longer: a lock that let
 * that one in would lose an increment (a busy machine may otherwise run
 * the processes one after the other).  The mutex lives in a memfd that each
 * child maps itself, so the processes meet on one word at different
 * addresses.  `lock` is shmutex_lock or shmutex_lock_spin. */
static void mutex_excludes(int (*lock)(struct pc_shmutex *m, const struct pc_shlock_ctx *cx))
{
	enum { PROCS = 4 };
	const int iters = TU_SANITIZED ? 10000 : 40000;
	int fd = memfd_create("shlock-test", MFD_CLOEXEC);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, sizeof(struct area)) == 0);
	struct area *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	REQUIRE(a != MAP_FAILED);
	slots_init(&a->slots);
	shmutex_init(&a->mutex);
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++) {
		pids[p] = tu_fork(300);
		if (pids[p] == 0) {
			/* A mapping of its own, at another address than the
			 * parent's (which the child also has). */
			struct area *m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			REQUIRE(m != MAP_FAILED && m != a);
			struct locker l;
			locker_attach(&l, &m->slots);
			uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(p + 1);
			atomic_fetch_add(&m->ready, 1);
			while (!atomic_load(&m->go))
				;
			for (int i = 0; i < iters; i++) {
				int r;
				atomic_fetch_add(&m->attempts, 1);
				atomic_fetch_add(&m->at_door, 1);
				if (i % 7 == 0) { /* trylock too, until it succeeds */
					while ((r = shmutex_trylock(&m->mutex, &l.cx)) == -EBUSY)
						sched_yield();
				} else {
					r = lock(&m->mutex, &l.cx);
				}
				atomic_fetch_sub(&m->at_door, 1);
				REQUIRE(r == 0);
				uint64_t v = *(volatile uint64_t *)&m->counter;
				if (tu_rand(&rng) % 256 == 0) {
					uint64_t until = tu_now_ms() + 20, seen = atomic_load(&m->attempts);
					while (atomic_load(&m->attempts) == seen && !atomic_load(&m->at_door) &&
					       atomic_load(&m->finished) < PROCS - 1 && tu_now_ms() < until)
						sched_yield();
					usleep(200);
				}
				*(volatile uint64_t *)&m->counter = v + 1;
				shmutex_unlock(&m->mutex, &l.cx);
			}
			atomic_fetch_add(&m->finished, 1);
			locker_detach(&l);
			exit(0);
		}
	}
	REQUIRE(TU_POLL(atomic_load(&a->ready) == PROCS, 10000));
	atomic_store(&a->go, 1);
	for (int p = 0; p < PROCS; p++)
		CHECK(tu_wait_child(pids[p], 300) == 0);
	CHECK(a->counter == (uint64_t)PROCS * (uint64_t)iters);
	CHECK(atomic_load(&a->mutex.word) == 0);
	munmap(a, sizeof(*a));
	close(fd);
}

TEST_CASE(mutex_excludes_across_processes)
{
	mutex_excludes(shmutex_lock);
}

/* The same with the spin before the sleep. */
TEST_CASE(spin_mutex_excludes_across_processes)
{
	mutex_excludes(shmutex_lock_spin);
}

/* The owner is SIGKILLed holding the mutex while another process waits
 * (in `lock`): the waiter keeps waiting while the owner lives, asleep on
 * the word (a spinning waiter too, once its spins are over), then gets the
 * lock within a second of the kill, told -EOWNERDEAD, and marks it
 * consistent; then the lock is an ordinary one again. */
static void mutex_owner_killed(int (*lock)(struct pc_shmutex *m, const struct pc_shlock_ctx *cx))
{
	struct area *a = area_new();
	pid_t holder = spawn_holder(a, 0);
	unsigned dead = (unsigned)atomic_load(&a->held);
	pid_t waiter = tu_fork(120);
	if (waiter == 0) {
		struct locker l;
		locker_attach(&l, &a->slots);
		atomic_store(&a->ready, 1);
		int r = lock(&a->mutex, &l.cx);
		atomic_store(&a->got_ms, tu_now_ms());
		atomic_store(&a->result, r);
		uint32_t w = atomic_load(&a->mutex.word);
		REQUIRE(shlock_word_owner(w) == (int)l.cx.self);
		REQUIRE(w & SHLOCK_INCONSISTENT);
		bump(&a->counter, false); /* the "repair" */
		shmutex_consistent(&a->mutex, &l.cx);
		shmutex_unlock(&a->mutex, &l.cx);
		locker_detach(&l);
		exit(0);
	}
	/* The waiter sleeps on the word, and asks about the live owner
	 * every SHLOCK_CHECK_MS: three times, and it still waits. */
	REQUIRE(TU_POLL(atomic_load(&a->mutex.word) & SHLOCK_WAITERS, 10000));
	usleep(3 * SHLOCK_CHECK_MS * 1000);
	CHECK(atomic_load(&a->result) == 1);
	CHECK(shlock_word_owner(atomic_load(&a->mutex.word)) == (int)dead);

	CHECK(kill_holder(a, holder));
	CHECK(tu_wait_child(waiter, 60) == 0);
	CHECK(atomic_load(&a->result) == -EOWNERDEAD);
	uint64_t took = atomic_load(&a->got_ms) - atomic_load(&a->kill_ms);
	printf("the waiter had the lock %llu ms after the kill\n", (unsigned long long)took);
	CHECK(atomic_load(&a->got_ms) >= atomic_load(&a->kill_ms));
	CHECK(took < 1000);
	CHECK(a->counter == 1);

	struct locker l;
	locker_attach(&l, &a->slots);
	CHECK(lock(&a->mutex, &l.cx) == 0); /* consistent again */
	shmutex_unlock(&a->mutex, &l.cx);
	CHECK(atomic_load(&a->mutex.word) == 0);
	locker_detach(&l);
	area_free(a);
}

TEST_CASE(mutex_owner_killed_waiter_gets_owner_dead)
{
	mutex_owner_killed(shmutex_lock);
}

/* A spinning waiter does not spin for ever on a dead owner's lock. */
TEST_CASE(spin_mutex_owner_killed_waiter_gets_owner_dead)
{
	mutex_owner_killed(shmutex_lock_spin);
}

/* An owner dies with nobody waiting: the next locker finds it dead.  A
 * holder that unlocks without marking the lock consistent leaves it
 * inconsistent for the next (lock and trylock alike), and recovery can
 * take a dead slot's lock over before it frees the slot. */
TEST_CASE(mutex_inconsistent_until_marked_consistent)
{
	struct area *a = area_new();
	struct locker l;
	locker_attach(&l, &a->slots);
	CHECK(kill_holder(a, spawn_holder(a, 0)));
	CHECK(shmutex_lock(&a->mutex, &l.cx) == -EOWNERDEAD);
	shmutex_unlock(&a->mutex, &l.cx); /* not repaired */
	CHECK(atomic_load(&a->mutex.word) == SHLOCK_INCONSISTENT);
	CHECK(shmutex_lock(&a->mutex, &l.cx) == -EOWNERDEAD); /* at once: no owner to ask about */
	shmutex_unlock(&a->mutex, &l.cx);
	CHECK(shmutex_trylock(&a->mutex, &l.cx) == -EOWNERDEAD);
	shmutex_consistent(&a->mutex, &l.cx);
	shmutex_unlock(&a->mutex, &l.cx);
	CHECK(shmutex_trylock(&a->mutex, &l.cx) == 0);
	shmutex_unlock(&a->mutex, &l.cx);

	/* Recovery: the dead slot's mutex is taken over before the slot is
	 * freed, so the slot's next occupant does not inherit it. */
	pid_t holder = spawn_holder(a, 0);
	unsigned dead = (unsigned)atomic_load(&a->held);
	CHECK(kill_holder(a, holder));
	CHECK(slots_recover_begin(&a->slots, &l.peers, dead) == 0);
	CHECK(shmutex_take_over(&a->mutex, &l.cx, dead) == -EOWNERDEAD);
	CHECK(shmutex_take_over(&a->mutex, &l.cx, dead) == 0); /* ours now */
	shmutex_consistent(&a->mutex, &l.cx);
	shmutex_unlock(&a->mutex, &l.cx);
	slots_release(&a->slots, dead);
	pid_t next = tu_fork(60);
	if (next == 0) {
		struct locker n;
		locker_attach(&n, &a->slots);
		REQUIRE(n.cx.self == dead); /* the same slot, a new occupant */
		exit(shmutex_trylock(&a->mutex, &n.cx) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(next, 60) == 0);
	locker_detach(&l);
	area_free(a);
}

/* Readers share, a writer excludes: two processes hold read locks at
 * once, a writer waits for both; then 4 processes mix writes of a pair
 * (written apart, under the write lock) with reads that must see its two
 * halves equal. */
TEST_CASE(rwlock_readers_share_writer_excludes)
{
	struct area *a = area_new();
	struct locker l;
	locker_attach(&l, &a->slots);
	pid_t r1 = spawn_holder(a, 2);
	pid_t r2 = spawn_holder(a, 2); /* would hang (watchdog) if r1 excluded it */
	CHECK(shrwlock_tryrdlock(&a->rw, &l.cx) == 0);
	shrwlock_rdunlock(&a->rw, &l.cx);
	CHECK(shrwlock_trywrlock(&a->rw, &l.cx) == -EBUSY);
	CHECK(atomic_load(&a->rw.word) == 0); /* given back */
	CHECK(kill_holder(a, r1));
	CHECK(kill_holder(a, r2));
	locker_detach(&l);
	area_free(a);

	enum { PROCS = 4 };
	const int iters = TU_SANITIZED ? 3000 : 12000;
	a = area_new();
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++) {
		pids[p] = tu_fork(300);
		if (pids[p] == 0) {
			struct locker c;
			locker_attach(&c, &a->slots);
			uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(p + 1);
			atomic_fetch_add(&a->ready, 1);
			while (!atomic_load(&a->go))
				;
			for (int i = 0; i < iters; i++) {
				if (tu_rand(&rng) % 4 == 0) {
					REQUIRE(shrwlock_wrlock(&a->rw, &c.cx) == 0);
					bump(&a->pair[0], false);
					bump(&a->pair[1], i % 64 == 0);
					shrwlock_wrunlock(&a->rw, &c.cx);
					atomic_fetch_add(&a->writes, 1);
				} else {
					REQUIRE(shrwlock_rdlock(&a->rw, &c.cx) == 0);
					uint64_t x = *(volatile uint64_t *)&a->pair[0];
					if (i % 64 == 1)
						usleep(50);
					for (volatile int k = 0; k < 20; k++)
						;
					uint64_t y = *(volatile uint64_t *)&a->pair[1];
					if (x != y)
						atomic_fetch_add(&a->bad_reads, 1);
					shrwlock_rdunlock(&a->rw, &c.cx);
				}
			}
			locker_detach(&c);
			exit(0);
		}
	}
	REQUIRE(TU_POLL(atomic_load(&a->ready) == PROCS, 10000));
	atomic_store(&a->go, 1);
	for (int p = 0; p < PROCS; p++)
		CHECK(tu_wait_child(pids[p], 300) == 0);
	printf("%llu writes, %llu reads saw a torn pair\n", (unsigned long long)atomic_load(&a->writes),
	       (unsigned long long)atomic_load(&a->bad_reads));
	CHECK(atomic_load(&a->writes) > 0);
	CHECK(a->pair[0] == atomic_load(&a->writes));
	CHECK(a->pair[1] == atomic_load(&a->writes));
	CHECK(atomic_load(&a->bad_reads) == 0);
	CHECK(atomic_load(&a->rw.word) == 0);
	for (unsigned s = 0; s < SLOTS_MAX; s++)
		CHECK(shrwlock_readers(&a->rw, s) == 0);
	area_free(a);
}

/* A reader is SIGKILLed holding a read lock while a writer waits: the
 * writer stays out (the count is the dead slot's, not cleared by the
 * writer), until the recovery of the slot clears it; then it gets in,
 * with 0: a reader leaves nothing to repair. */
TEST_CASE(rwlock_reader_killed_writer_enters_after_recovery)
{
	struct area *a = area_new();
	struct locker l;
	locker_attach(&l, &a->slots);
	pid_t reader = spawn_holder(a, 2);
	unsigned dead = (unsigned)atomic_load(&a->held);
	pid_t writer = tu_fork(120);
	if (writer == 0) {
		struct locker w;
		locker_attach(&w, &a->slots);
		atomic_store(&a->ready, (int)w.cx.self + 1);
		int r = shrwlock_wrlock(&a->rw, &w.cx);
		atomic_store(&a->seen_cleared, atomic_load(&a->cleared));
		atomic_store(&a->result, r);
		shrwlock_wrunlock(&a->rw, &w.cx);
		locker_detach(&w);
		exit(0);
	}
	/* The writer holds the word and waits for the reader. */
	REQUIRE(TU_POLL(atomic_load(&a->ready) > 0, 10000));
	int wslot = atomic_load(&a->ready) - 1;
	REQUIRE(TU_POLL(shlock_word_owner(atomic_load(&a->rw.word)) == wslot, 10000));
	CHECK(shrwlock_tryrdlock(&a->rw, &l.cx) == -EBUSY); /* new readers stay out */
	CHECK(kill_holder(a, reader));
	CHECK(slots_alive(&a->slots, &l.peers, dead) == 0);
	CHECK(shrwlock_readers(&a->rw, dead) == 1);
	usleep(3 * SHLOCK_CHECK_MS * 1000);
	CHECK(atomic_load(&a->result) == 1); /* still waiting */

	CHECK(slots_recover_begin(&a->slots, &l.peers, dead) == 0);
	CHECK(shrwlock_take_over(&a->rw, &l.cx, dead) == 0); /* it was no writer */
	atomic_store(&a->cleared, 1);
	shrwlock_clear_reader(&a->rw, dead);
	slots_release(&a->slots, dead);
	CHECK(tu_wait_child(writer, 60) == 0);
	CHECK(atomic_load(&a->result) == 0);
	CHECK(atomic_load(&a->seen_cleared) == 1);
	CHECK(shrwlock_readers(&a->rw, dead) == 0);
	CHECK(shrwlock_rdlock(&a->rw, &l.cx) == 0);
	shrwlock_rdunlock(&a->rw, &l.cx);
	CHECK(atomic_load(&a->rw.word) == 0);
	locker_detach(&l);
	area_free(a);
}

/* A writer is SIGKILLed holding the write lock while a reader waits: the
 * reader gets -EOWNERDEAD within a second, holding the lock for writing,
 * repairs, marks it consistent and releases it as a writer; then reads
 * go on. */
TEST_CASE(rwlock_writer_killed_reader_takes_over)
{
	struct area *a = area_new();
	pid_t holder = spawn_holder(a, 1);
	unsigned dead = (unsigned)atomic_load(&a->held);
	pid_t reader = tu_fork(120);
	if (reader == 0) {
		struct locker l;
		locker_attach(&l, &a->slots);
		int r = shrwlock_rdlock(&a->rw, &l.cx);
		atomic_store(&a->got_ms, tu_now_ms());
		atomic_store(&a->result, r);
		REQUIRE(r == -EOWNERDEAD);
		REQUIRE(shlock_word_owner(atomic_load(&a->rw.word)) == (int)l.cx.self);
		REQUIRE(shrwlock_readers(&a->rw, l.cx.self) == 0);
		bump(&a->counter, false);
		shrwlock_consistent(&a->rw, &l.cx);
		shrwlock_wrunlock(&a->rw, &l.cx);
		REQUIRE(shrwlock_rdlock(&a->rw, &l.cx) == 0);
		shrwlock_rdunlock(&a->rw, &l.cx);
		locker_detach(&l);
		exit(0);
	}
	REQUIRE(TU_POLL(atomic_load(&a->rw.word) & SHLOCK_WAITERS, 10000));
	usleep(3 * SHLOCK_CHECK_MS * 1000);
	CHECK(atomic_load(&a->result) == 1);
	CHECK(shlock_word_owner(atomic_load(&a->rw.word)) == (int)dead);
	CHECK(kill_holder(a, holder));
	CHECK(tu_wait_child(reader, 60) == 0);
	CHECK(atomic_load(&a->result) == -EOWNERDEAD);
	uint64_t took = atomic_load(&a->got_ms) - atomic_load(&a->kill_ms);
	printf("the reader had the lock %llu ms after the kill\n", (unsigned long long)took);
	CHECK(took < 1000);
	CHECK(a->counter == 1);
	CHECK(atomic_load(&a->rw.word) == 0);

	struct locker l;
	locker_attach(&l, &a->slots);
	CHECK(shrwlock_wrlock(&a->rw, &l.cx) == 0);
	shrwlock_wrunlock(&a->rw, &l.cx);
	locker_detach(&l);
	area_free(a);
}

/* ------------------------------------------------- the owning thread */

/* Another thread of the process that locked (the same slot). */
struct other_thread {
	struct area *a;
	const struct pc_shlock_ctx *cx;
	uint32_t tid;
	bool held; /* shmutex_held, as it saw it */
	int trylock;
};

static void *other_thread_main(void *arg)
{
	struct other_thread *o = arg;
	o->tid = shlock_thread_id();
	o->held = shmutex_held(&o->a->mutex, o->cx);
	o->trylock = shmutex_trylock(&o->a->mutex, o->cx);
	shmutex_unlock(&o->a->mutex, o->cx); /* its process's lock: any thread may */
	return NULL;
}

/* Beside the word, the holder's thread id: the mutex's and the writer's,
 * not a reader's; cleared at unlock, by whichever thread of the process
 * releases it.  shmutex_held is true for that thread only, not for the
 * other threads of its slot.  A child of fork records its own id. */
TEST_CASE(owner_thread_id_beside_the_word)
{
	struct area *a = area_new();
	struct locker l;
	locker_attach(&l, &a->slots);
	uint32_t me = (uint32_t)syscall(SYS_gettid);
	CHECK(shlock_thread_id() == me);
	CHECK(!shmutex_held(&a->mutex, &l.cx));
	CHECK(shmutex_lock(&a->mutex, &l.cx) == 0);
	CHECK(atomic_load(&a->mutex.tid) == me);
	CHECK(shmutex_held(&a->mutex, &l.cx));

	struct other_thread o = { .a = a, .cx = &l.cx };
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, other_thread_main, &o) == 0);
	REQUIRE(pthread_join(t, NULL) == 0);
	CHECK(o.tid != 0 && o.tid != me);
	CHECK(!o.held);
	CHECK(o.trylock == -EBUSY);
	CHECK(atomic_load(&a->mutex.word) == 0); /* it released it */
	CHECK(atomic_load(&a->mutex.tid) == 0);
	CHECK(!shmutex_held(&a->mutex, &l.cx));

	CHECK(shmutex_trylock(&a->mutex, &l.cx) == 0);
	CHECK(atomic_load(&a->mutex.tid) == me);
	shmutex_unlock(&a->mutex, &l.cx);
	CHECK(atomic_load(&a->mutex.tid) == 0);

	CHECK(shrwlock_wrlock(&a->rw, &l.cx) == 0);
	CHECK(atomic_load(&a->rw.tid) == me);
	CHECK(shrwlock_wrheld(&a->rw, &l.cx));
	shrwlock_wrunlock(&a->rw, &l.cx);
	CHECK(atomic_load(&a->rw.tid) == 0);
	CHECK(shrwlock_rdlock(&a->rw, &l.cx) == 0);
	CHECK(atomic_load(&a->rw.tid) == 0);
	CHECK(!shrwlock_wrheld(&a->rw, &l.cx));
	CHECK(shrwlock_trywrlock(&a->rw, &l.cx) == -EBUSY); /* our own read hold */
	CHECK(atomic_load(&a->rw.tid) == 0);
	shrwlock_rdunlock(&a->rw, &l.cx);
	CHECK(shrwlock_trywrlock(&a->rw, &l.cx) == 0);
	CHECK(atomic_load(&a->rw.tid) == me);
	shrwlock_wrunlock(&a->rw, &l.cx);

	/* This thread's id is known already; the child's is another. */
	pid_t child = tu_fork(60);
	if (child == 0) {
		struct locker c;
		locker_attach(&c, &a->slots);
		uint32_t child_tid = (uint32_t)syscall(SYS_gettid);
		REQUIRE(shmutex_lock(&a->mutex, &c.cx) == 0);
		int bad = atomic_load(&a->mutex.tid) != child_tid || shlock_thread_id() != child_tid;
		shmutex_unlock(&a->mutex, &c.cx);
		locker_detach(&c);
		exit(bad);
	}
	CHECK(tu_wait_child(child, 60) == 0);
	locker_detach(&l);
	area_free(a);
}

/* ------------------------------------------------- the lock-order record */

/* Run `run` in a child, a locker of its own in area a, with its stderr
 * kept: returns its status (tu_wait_child), and what it said in *said. */
static int run_in_child(struct area *a, void (*run)(struct area *a, struct locker *l), char *said, size_t size)
{
	int out = memfd_create("shlock-stderr", MFD_CLOEXEC);
	REQUIRE(out >= 0);
	pid_t pid = tu_fork_alone(60);
	if (pid == 0) {
		if (dup2(out, 2) < 0)
			_exit(100);
		struct locker l;
		locker_attach(&l, &a->slots);
		run(a, &l);
		locker_detach(&l);
		exit(0);
	}
	int st = tu_wait_child(pid, 90);
	ssize_t n = pread(out, said, size - 1, 0);
	said[n > 0 ? n : 0] = '\0';
	close(out);
	return st;
}

/* A checking build must abort in `run`, saying `says` (NULL: the calls are
 * right and nothing trips); a build without checks must run through.  Each
 * run has an area of its own (a child that aborts leaves its locks to a
 * dead slot); with `dead_writer`, a writer died holding its write lock. */
static void check_trips(void (*run)(struct area *a, struct locker *l), const char *says, bool dead_writer)
{
	static char said[1 << 16];
	struct area *a = area_new();
	if (dead_writer)
		CHECK(kill_holder(a, spawn_holder(a, 1)));
	int st = run_in_child(a, run, said, sizeof(said));
	bool trips = PC_CHECKS && says;
	CHECK(st == (trips ? 128 + SIGABRT : 0));
	CHECK(trips ? strstr(said, says) != NULL : strstr(said, "check failed") == NULL);
	if (st != (trips ? 128 + SIGABRT : 0) || (trips && !strstr(said, says)))
		fprintf(stderr, "the child (checks %s) said:\n%s\n", PC_CHECKS ? "on" : "off", said);
	if (!trips) /* it ran through: every lock given back */
		CHECK(atomic_load(&a->rw.word) == 0 && atomic_load(&a->mutex.word) == 0);
	area_free(a);
}

/* A leaf mutex held while taking a counted lock of the tree's level. */
static void leaf_then_tree(struct area *a, struct locker *l)
{
	REQUIRE(noted_shmutex_lock(&a->mutex, &l->cx, LOCK_LEAF) == 0);
	REQUIRE(noted_shrwlock_wrlock(&a->rw, &l->cx, LOCK_TREE) == 0);
	noted_shrwlock_wrunlock(&a->rw, &l->cx);
	noted_shmutex_unlock(&a->mutex, &l->cx);
}

/* The block-state lock (spinning) taken under a leaf lock: tree, leaf,
 * state, where the order is tree, state, leaf. */
static void leaf_then_state(struct area *a, struct locker *l)
{
	static struct pc_shmutex state;
	REQUIRE(noted_shrwlock_rdlock(&a->rw, &l->cx, LOCK_TREE) == 0);
	REQUIRE(noted_shmutex_lock(&a->mutex, &l->cx, LOCK_LEAF) == 0);
	REQUIRE(noted_shmutex_lock_spin(&state, &l->cx, LOCK_STATE) == 0);
	noted_shmutex_unlock(&state, &l->cx);
	noted_shmutex_unlock(&a->mutex, &l->cx);
	noted_shrwlock_rdunlock(&a->rw, &l->cx);
}

/* A thread that takes a mutex it holds itself (bare calls). */
static void relock_own(struct area *a, struct locker *l)
{
	REQUIRE(shmutex_lock(&a->mutex, &l->cx) == 0);
	shmutex_lock(&a->mutex, &l->cx);
}

/* "Held by this thread" while another thread of the same slot holds it. */
static void *hold_mutex(void *arg)
{
	struct locker *l = arg;
	struct area *a = (struct area *)((char *)l->cx.slots - offsetof(struct area, slots));
	REQUIRE(shmutex_lock(&a->mutex, &l->cx) == 0);
	return NULL; /* held: the caller releases it */
}

static void held_by_other_thread(struct area *a, struct locker *l)
{
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, hold_mutex, l) == 0);
	REQUIRE(pthread_join(t, NULL) == 0);
	assert_shmutex_held(&a->mutex, &l->cx);
	shmutex_unlock(&a->mutex, &l->cx);
}

/* The right order (tree, state, leaf), and what the record says of each
 * hold.  The write lock
 * was left by a dead writer: the read lock gets -EOWNERDEAD and holds it
 * for writing, and the record says so. */
static void right_order(struct area *a, struct locker *l)
{
	static struct pc_shmutex state;
	REQUIRE(noted_shrwlock_rdlock(&a->rw, &l->cx, LOCK_TREE) == -EOWNERDEAD);
	assert_shrwlock_wrheld(&a->rw, &l->cx);
#if PC_CHECKS
	REQUIRE(lock_held_excl(&a->rw));
#endif
	shrwlock_consistent(&a->rw, &l->cx);
	noted_shrwlock_wrunlock(&a->rw, &l->cx);
	REQUIRE(noted_shrwlock_rdlock(&a->rw, &l->cx, LOCK_TREE) == 0);
	assert_shrwlock_held(&a->rw);
#if PC_CHECKS
	REQUIRE(lock_held(&a->rw) && !lock_held_excl(&a->rw));
#endif
	REQUIRE(noted_shmutex_lock_spin(&state, &l->cx, LOCK_STATE) == 0);
	assert_shmutex_held(&state, &l->cx);
	REQUIRE(noted_shmutex_trylock(&a->mutex, &l->cx, LOCK_LEAF) == 0);
	assert_shmutex_held(&a->mutex, &l->cx);
	noted_shmutex_unlock(&a->mutex, &l->cx);
	noted_shmutex_unlock(&state, &l->cx);
	noted_shrwlock_rdunlock(&a->rw, &l->cx);
#if PC_CHECKS
	REQUIRE(!lock_held(&a->rw) && !lock_held(&a->mutex) && !lock_held(&state));
#endif
	REQUIRE(noted_shrwlock_tryrdlock(&a->rw, &l->cx, LOCK_TREE) == 0);
	noted_shrwlock_rdunlock(&a->rw, &l->cx);
	REQUIRE(noted_shrwlock_trywrlock(&a->rw, &l->cx, LOCK_TREE) == 0);
	assert_shrwlock_wrheld(&a->rw, &l->cx);
#if PC_CHECKS
	REQUIRE(lock_held_excl(&a->rw));
#endif
	REQUIRE(noted_shmutex_lock(&a->mutex, &l->cx, LOCK_LEAF) == 0);
	noted_shmutex_unlock(&a->mutex, &l->cx);
	noted_shrwlock_wrunlock(&a->rw, &l->cx);
}

/* The noted wrappers check the lock order before they wait and keep the
 * thread's record (check.h), as noted_lock does for pthread mutexes; the
 * "held by this thread" rules read the thread id beside the word.  A
 * checking build aborts on each broken rule, with its message; a build
 * without checks runs the same calls through (but a thread taking its own
 * lock, which would wait for ever there). */
TEST_CASE(noted_locks_check_order_and_holder)
{
	check_trips(leaf_then_tree, "takes: tree_lock while holding leaf lock", false);
	check_trips(leaf_then_state, "takes: block-state spinlock while holding leaf lock", false);
	check_trips(held_by_other_thread, "shmutex_held", false);
	if (PC_CHECKS)
		check_trips(relock_own, "takes a shared lock this thread holds", false);
	check_trips(right_order, NULL, true);
}
