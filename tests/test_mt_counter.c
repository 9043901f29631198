/*
 * test_mt_counter.c - the statistics counters of src/lib/counter.h.
 *
 *   - threads_sum_exactly: eight threads (as many as there are slots) and
 *     four more (which add to `shared`) each add to one counter; the sum
 *     is exact, and a slot keeps its count when its thread ends.
 *   - processes_share_with_atomic_adds (not under TSan, which cannot
 *     follow processes): a counter in MAP_SHARED memory made atomic
 *     (counter_make_atomic), as a shared cache's are, counted by two processes of four
 *     threads each.  Slot numbers are per process, so the two processes'
 *     threads own the same slots; the sum must still be exact.  (Without
 *     it the plain adds lose counts, but not in every run: that
 *     side is not a test.)
 */
#include "testutil.h"

#include "lib/counter.h"

#include <pthread.h>
#include <sys/mman.h>

static void counter_setup(void)
{
	tu_exit_guard();
	counter_init();
}

TEST_FIXTURE(counter_setup, NULL)

enum { ADDS = 200000 };

static void *add_thread(void *arg)
{
	struct pc_counter *c = arg;
	for (int i = 0; i < ADDS; i++)
		counter_add(c, 3);
	return NULL;
}

static void run_threads(struct pc_counter *c, int n)
{
	pthread_t th[16];
	REQUIRE(n <= 16);
	for (int i = 0; i < n; i++)
		REQUIRE(pthread_create(&th[i], NULL, add_thread, c) == 0);
	for (int i = 0; i < n; i++)
		REQUIRE(pthread_join(th[i], NULL) == 0);
}

TEST_CASE(threads_sum_exactly)
{
	static struct pc_counter c;
	run_threads(&c, PC_COUNTER_SLOTS + 4);
	CHECK(counter_sum(&c) == 3ull * ADDS * (PC_COUNTER_SLOTS + 4));
	/* Their slots went back, and keep the counts for the next owners. */
	run_threads(&c, 2);
	CHECK(counter_sum(&c) == 3ull * ADDS * (PC_COUNTER_SLOTS + 6));
}

TEST_CASE(processes_share_with_atomic_adds)
{
	if (TU_TSAN)
		TEST_SKIP_UNSUPPORTED("ThreadSanitizer cannot follow processes");
	struct pc_counter *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(c != MAP_FAILED);
	counter_make_atomic(c);
	pid_t pid = tu_fork_alone(60);
	if (pid == 0) {
		run_threads(c, 4);
		exit(0);
	}
	run_threads(c, 4);
	CHECK(tu_wait_child(pid, 70) == 0);
	CHECK(counter_sum(c) == 3ull * ADDS * 8);
	munmap(c, sizeof(*c));
}
