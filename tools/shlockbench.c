/*
 * shlockbench - what the shared locks of src/lib/shlock.h cost, beside a
 * pthread spinlock and a pthread mutex (both process-shared) and the
 * block-state lock of today (a bit of the folio's flags that waiters spin
 * on, mem/block_state.c), for a short critical section like that lock's
 * (docs/shared.md, 3).
 *
 *   shlockbench [SECONDS_PER_RUN [RUNS [SCENARIO [LOCK]]]]
 *
 * (default 0.2 s, 5 runs, every scenario and lock; SCENARIO and LOCK are
 * names as printed, "all" for all).  How many futex calls the locks make,
 * which is what a short section's waits cost beyond the CPU time:
 *
 *   perf stat -e syscalls:sys_enter_futex build/shlockbench 0.2 5 light shmutex_lock
 *
 * divided by the total of locks that the run prints.
 *
 * Scenarios, each run RUNS times; printed are the median and the range:
 *   uncontended  one thread: lock, 8 plain increments, unlock; ns per lock
 *   light        2 threads, 200 rounds of their own work between locks
 *                (a multiply-add each; the time a round takes is printed):
 *                locks per µs; CPU time per lock (user and system, all
 *                threads: the spins and the system calls of the waits),
 *                the system's share of it; sleeps (voluntary context
 *                switches) per 1000 locks
 *   heavy        2 threads, no work between locks
 *   4threads     4 threads on this machine's CPUs, light work: what a
 *                holder preempted by another thread costs the spinners
 * Every thread of the shared locks has a slot of its own, as a process
 * would.  The numbers belong to this machine and its load: compare the
 * rows of one run, never with a figure from elsewhere.
 */
#define _GNU_SOURCE
#include "lib/shlock.h"
#include "lib/slots.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum kind { BITSPIN, PSPIN, PMUTEX, SHMUTEX, SHMUTEX_SPIN, NKINDS };
/* state_bit: the block-state lock of today, mem/block_state.c's state_lock */
static const char *const kind_name[NKINDS] = { "state_bit", "pthread_spin", "pthread_mutex", "shmutex_lock",
					       "shmutex_lock_spin" };

static struct {
	_Atomic uint32_t flags; /* a folio's flags word: its block-state lock bit */
	pthread_spinlock_t spin;
	pthread_mutex_t mutex;
	struct pc_shmutex sh;
	struct pc_slots slots;
	volatile uint64_t data[8]; /* the critical section's plain stores */
	_Atomic int stop;
} g;

struct worker {
	enum kind kind;
	unsigned work; /* rounds of its own work between locks */
	pthread_barrier_t *start;
	pthread_t thread;
	uint64_t ops;
	long sleeps;
	double cpu, sys; /* seconds of CPU time: all, in the kernel */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* mem/block_state.c's state_lock, as it is before shared caches. */
#define STATE_BIT (1u << 13)
static void bit_lock(void)
{
	while (atomic_fetch_or_explicit(&g.flags, STATE_BIT, memory_order_acquire) & STATE_BIT)
		__builtin_ia32_pause();
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pc_slot_peers peers;
	slots_peers_init(&peers);
	int slot = slots_claim(&g.slots);
	if (slot < 0) {
		fprintf(stderr, "shlockbench: no slot\n");
		exit(1);
	}
	struct pc_shlock_ctx cx = { .slots = &g.slots, .peers = &peers, .self = (unsigned)slot };
	struct rusage ru0, ru1;
	uint64_t x = (uint64_t)slot + 1, ops = 0;
	pthread_barrier_wait(w->start);
	getrusage(RUSAGE_THREAD, &ru0);
	while (!atomic_load_explicit(&g.stop, memory_order_relaxed)) {
		for (int batch = 0; batch < 64; batch++) {
			switch (w->kind) {
			case BITSPIN: bit_lock(); break;
			case PSPIN: pthread_spin_lock(&g.spin); break;
			case PMUTEX: pthread_mutex_lock(&g.mutex); break;
			case SHMUTEX: shmutex_lock(&g.sh, &cx); break;
			default: shmutex_lock_spin(&g.sh, &cx); break;
			}
			for (int i = 0; i < 8; i++)
				g.data[i] = g.data[i] + 1;
			switch (w->kind) {
			case BITSPIN: atomic_fetch_and_explicit(&g.flags, ~STATE_BIT, memory_order_release); break;
			case PSPIN: pthread_spin_unlock(&g.spin); break;
			case PMUTEX: pthread_mutex_unlock(&g.mutex); break;
			default: shmutex_unlock(&g.sh, &cx); break;
			}
			for (unsigned i = 0; i < w->work; i++) /* its own work */
				x = x * 6364136223846793005ull + 1442695040888963407ull;
		}
		ops += 64;
	}
	getrusage(RUSAGE_THREAD, &ru1);
	w->ops = ops + (x == 42); /* keeps x */
	w->sleeps = ru1.ru_nvcsw - ru0.ru_nvcsw;
	w->sys = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	w->cpu = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime) + w->sys;
	slots_release(&g.slots, (unsigned)slot);
	slots_peers_destroy(&peers);
	return NULL;
}

/* What one run measured. */
struct result {
	uint64_t ops;  /* locks, all threads */
	double rate;   /* locks per second, all threads */
	double sleeps; /* voluntary context switches per 1000 locks */
	double cpu;    /* CPU ns per lock (user + system), all threads */
	double sys;    /* the system's share of it, % */
};

/* One run: `threads` workers for `seconds`. */
static struct result run(enum kind kind, unsigned threads, unsigned work, double seconds)
{
	struct worker w[8];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, threads + 1);
	atomic_store(&g.stop, 0);
	for (unsigned i = 0; i < threads; i++) {
		w[i] = (struct worker){ .kind = kind, .work = work, .start = &start };
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i])) {
			perror("pthread_create");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	double t0 = now_s();
	struct timespec nap = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
	nanosleep(&nap, NULL);
	atomic_store(&g.stop, 1);
	uint64_t ops = 0;
	long csw = 0;
	double cpu = 0, sys = 0;
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		ops += w[i].ops;
		csw += w[i].sleeps;
		cpu += w[i].cpu;
		sys += w[i].sys;
	}
	double t = now_s() - t0;
	pthread_barrier_destroy(&start);
	return (struct result){
		.ops = ops,
		.rate = (double)ops / t,
		.sleeps = ops ? 1000.0 * (double)csw / (double)ops : 0,
		.cpu = ops ? cpu * 1e9 / (double)ops : 0,
		.sys = cpu > 0 ? 100.0 * sys / cpu : 0,
	};
}

/* What one round of a worker's own work takes (ns). */
static double work_round_ns(void)
{
	enum { ROUNDS = 10000000 };
	volatile uint64_t sink;
	uint64_t x = 1;
	double t0 = now_s();
	for (unsigned i = 0; i < ROUNDS; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
	(void)sink;
	return (now_s() - t0) * 1e9 / ROUNDS;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 0.2;
	int runs = argc > 2 ? atoi(argv[2]) : 5;
	const char *only_scen = argc > 3 && strcmp(argv[3], "all") ? argv[3] : NULL;
	const char *only_kind = argc > 4 && strcmp(argv[4], "all") ? argv[4] : NULL;
	if (seconds <= 0 || seconds > 10 || runs < 1 || runs > 99 || argc > 5) {
		fprintf(stderr, "usage: shlockbench [SECONDS_PER_RUN (0-10] [RUNS (1-99) [SCENARIO [LOCK]]]]\n");
		return 2;
	}
	pthread_spin_init(&g.spin, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&g.mutex, &ma);
	shmutex_init(&g.sh);
	slots_init(&g.slots);

	static const struct {
		const char *name;
		unsigned threads, work;
	} scen[] = { { "uncontended", 1, 0 }, { "light", 2, 200 }, { "heavy", 2, 0 }, { "4threads", 4, 200 } };
	printf("%d runs of %.2f s each; median [min-max]\n", runs, seconds);
	printf("a round of work between locks takes %.2f ns here\n", work_round_ns());
	uint64_t locks = 0;
	for (unsigned s = 0; s < sizeof(scen) / sizeof(scen[0]); s++) {
		if (only_scen && strcmp(only_scen, scen[s].name))
			continue;
		bool one = scen[s].threads == 1;
		printf("\n%s (%u thread%s, %u rounds of work between locks)\n", scen[s].name, scen[s].threads,
		       one ? "" : "s", scen[s].work);
		if (one)
			printf("  %-18s %s\n", "", "ns per lock+unlock");
		else
			printf("  %-18s %-20s %-20s %-20s %s\n", "", "locks per µs", "CPU ns per lock", "sys %",
			       "sleeps per 1000");
		for (int k = 0; k < NKINDS; k++) {
			if (only_kind && strcmp(only_kind, kind_name[k]))
				continue;
			double v[4][99];
			for (int r = 0; r < runs; r++) {
				struct result res = run((enum kind)k, scen[s].threads, scen[s].work, seconds);
				locks += res.ops;
				v[0][r] = one ? 1e9 / res.rate : res.rate / 1e6;
				v[1][r] = res.cpu;
				v[2][r] = res.sys;
				v[3][r] = res.sleeps;
			}
			printf("  %-18s", kind_name[k]);
			for (int c = 0; c < (one ? 1 : 4); c++) {
				qsort(v[c], (size_t)runs, sizeof(double), cmp_double);
				char cell[64];
				snprintf(cell, sizeof(cell), "%.2f [%.2f-%.2f]", v[c][runs / 2], v[c][0], v[c][runs - 1]);
				printf(" %-20s", cell);
			}
			printf("\n");
		}
	}
	printf("\n%llu locks in all\n", (unsigned long long)locks);
	return 0;
}
