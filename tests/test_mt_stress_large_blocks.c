/*
 * test_mt_stress_large_blocks.c - every call at once (mt_stress_util.h) on
 * caches of 16 KiB blocks (the file system's own if it refuses those) and
 * 256 KiB folios in 6 MiB of memory: more of the writes cover only part of
 * a block (read-modify-write, at once or deferred), every region boundary
 * falls inside a block, and aligned direct I/O has fewer whole blocks to
 * take.  8 and 16 threads.
 *
 * A timed soak: PC_STRESS_SECONDS=N runs each case for N seconds.
 */
#include "harness.h"
#include "mt_stress_util.h"

static const struct scfg large_blocks = { "bs16384-folio256K-mem6M", 1, 16384, 256 * KiB, 6 * MiB };

TEST_FIXTURE(stress_setup, stress_teardown)

/* Evictions are not certain here (the final reads may fit in 6 MiB):
 * printed, not checked. */
TEST_CASE(every_call_at_once_8_threads)
{
	stress_case(8, &large_blocks);
}

TEST_CASE(every_call_at_once_16_threads)
{
	stress_case(16, &large_blocks);
}
