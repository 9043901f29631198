/*
 * mt_stress_util.h - the stress tests, every call at once, for the
 * test_mt_stress_* programs (mt_stress_util.c): each case runs from 2 to
 * 64 threads that mix every call of the library at random on the same
 * three files, with checks of every result, under a memory limit small
 * enough to force eviction and dirty throttling, with a stall watchdog;
 * at the end of a round everything is read back through the cache and
 * from the backing files.  mt_stress_util.c says what is checked and how.
 *
 * A test file declares the fixture TEST_FIXTURE(stress_setup,
 * stress_teardown) and its cases, each a call of stress_case() with a
 * thread count and one of its cache configurations.
 *
 * Environment: PC_SEED; PC_TEST_QUICK=1 (a quarter of the operations);
 * PC_STRESS_OPS (operations of a case, shared by its threads; default
 * 10000, quick 3000, under sanitizers a quarter of that);
 * PC_STRESS_SECONDS=N (each case runs rounds, each with a new seed, for N
 * seconds instead: the soak); PC_STRESS_STALL_S; PC_STRESS_TIMEOUT_S (the
 * overall bound of a case); PC_STRESS_GDB=0; PC_STRESS_OWN_READS and
 * PC_STRESS_SKIP (mt_stress_util.c).  A failure replays with the seed and
 * the case: PC_SEED=N ./test_mt_stress_... CASE.
 */
#ifndef PC_MT_STRESS_UTIL_H
#define PC_MT_STRESS_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

/* A cache configuration of the stress (the dirty limit: an eighth of the
 * memory limit).  `id` goes into the seeds of its rounds. */
struct scfg {
	const char *name;
	int id;
	size_t block_size, max_folio, memory_limit;
};

/* The fixture: the buffers the cases share, the program's scratch
 * directory, and the environment's choices of calls and flags; the
 * teardown prints the program's count of operations ("test_mt_stress_...:
 * N operations", which scripts/soak.sh counts) and frees them. */
void stress_setup(void);
void stress_teardown(void);

/*
 * The body of a case: `threads` threads (at most 64) make every call at
 * once on caches of `cfg`, in one round of PC_STRESS_OPS calls or, with
 * PC_STRESS_SECONDS=N, in rounds of up to 30 s (each with a new seed) for
 * N seconds.  Checks that no thread and no end-of-round check found
 * anything wrong; returns the evictions of its rounds.
 */
uint64_t stress_case(int threads, const struct scfg *cfg);

#endif
