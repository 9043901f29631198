/*
 * mt_stress_util_internal.h - what the two halves of the stress tests
 * share (not for the test files: they include mt_stress_util.h).
 * mt_stress_util.c: the rounds, the watchdog, the tracking of calls, the
 * check of what a read returned and the end-of-round checks;
 * mt_stress_util_calls.c: the calls the threads make and their checks.
 */
#ifndef PC_MT_STRESS_UTIL_INTERNAL_H
#define PC_MT_STRESS_UTIL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mt_stress_util.h"
#include "pagecache.h"

#define NFILES 3
#define MAX_THREADS 64
#define PRIVATE_TOTAL (1536 * KiB) /* the private regions of one file */
#define SHARED (1536 * KiB)        /* the shared zone of one file */
#define MAX_IO (160 * KiB)      /* largest read or write */
#define READ_PAST (64 * KiB)    /* reads may start this far past the zone */
#define POOL_SIZE (4 * MiB)     /* random bytes private writes copy from */
#define BUF_SIZE (MAX_IO + 8 * KiB)
#define GUARD 64
#define HIST 12
#define MAIN_SLOT MAX_THREADS /* the main thread's slot in workers[] */

enum op {
	OP_PREAD,
	OP_PREADV,
	OP_PWRITE,
	OP_PWRITEV,
	OP_FTRUNCATE,
	OP_FALLOC,
	OP_FALLOC_KEEP,
	OP_PUNCH,
	OP_ZERO,
	OP_ZERO_KEEP,
	OP_FSYNC,
	OP_FDATASYNC,
	OP_ADV_DONTNEED,
	OP_ADV_WILLNEED,
	OP_ADV_NOREUSE,
	OP_ADV_NORMAL,
	OP_OPEN,
	OP_CLOSE,
	OP_SIZE,
	OP_CACHE_STATS,
	OP_FILE_STATS,
	OP_COUNT,
	/* main thread only: not drawn at random */
	OP_FINAL = OP_COUNT,
	OP_NONE,
};

/* The calls' names, by enum op (and "final checks", "-"). */
extern const char *const op_names[];

struct hist {
	int op, file, flags;
	char target;
	uint64_t off, len;
	long long ret;
	int err;
};

struct worker {
	pthread_t tid;
	int t;
	uint64_t seed; /* of this thread in this round */
	uint64_t rng;
	uint8_t *model[NFILES]; /* P bytes each: the own region of each file */
	uint8_t *buf;           /* reads land here, 4 KiB aligned */
	struct pc_file *extra[NFILES];
	int extra_oflags[NFILES];
	bool failed;
	uint64_t limit; /* operations to do (UINT64_MAX: until told to stop) */
	uint64_t done;
	uint64_t ops[OP_COUNT + 1];
	uint64_t eagain, short_nowait, ebadf_ro;
	struct hist hist[HIST];
	unsigned nhist;
	/* What the watchdog sees (relaxed atomics: only for the report). */
	_Atomic int cur_op, cur_file, cur_flags, in_call;
	_Atomic uint64_t cur_off, cur_len, cur_since_ms, cur_done;
};

/* ------------------------------------------------------ shared state */

/* The round: set by the main thread before it starts the workers. */
extern int round_no;
extern const struct scfg *rcfg;
extern int nthreads;
extern uint64_t P, floor_;
extern uint64_t bs;
extern struct pc_cache *cache;
extern struct pc_file *main_f[NFILES];
extern char paths[NFILES][4200];
extern uint8_t *spat[NFILES]; /* shared pattern of the zone, SHARED bytes */
extern uint8_t *pool;         /* random bytes private writes copy from */
extern struct worker workers[MAX_THREADS + 1];
extern _Atomic bool stop_round; /* timed rounds: the workers stop */

/* Where thread t's private region of every file starts. */
static inline uint64_t own_start(int t)
{
	return (uint64_t)t * P;
}

/* The call w is in (op_begin) and its result (op_end): its history and
 * what the watchdog sees. */
void op_begin(struct worker *w, int op, int file, char target, uint64_t off, uint64_t len, int flags);
void op_end(struct worker *w, long long ret);

/* A failed check of worker w: report it with the context needed to
 * replay, and stop the worker. */
void wfail(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* got[0, n), read at file offset off, against the models of threads
 * [t0, t1) and the shared zone (mt_stress_util.c says what is allowed). */
bool content_ok(int file, uint64_t off, const uint8_t *got, uint64_t n, int t0, int t1, uint64_t *bad, char *msg,
		size_t msgsz);

/* mt_stress_util_calls.c: the environment's choices of calls and flags
 * (PC_STRESS_OWN_READS, PC_STRESS_SKIP), before any round; and the body of
 * a worker thread, which makes calls until its limit or stop_round. */
void stress_calls_setup(void);
void *worker_main(void *arg);

#endif
