/*
 * test_mt_stress_small_blocks.c - every call at once (mt_stress_util.h) on
 * caches of 4 KiB blocks and 64 KiB folios in 4 MiB of memory: the final
 * whole-file reads alone exceed the limit, so every round evicts, and the
 * dirty limit (512 KiB) throttles the writers all along.  With 2 threads
 * the private regions are long and the I/O large; with 64 a region is about
 * six blocks and every thread shares a block with each neighbour.
 *
 * A timed soak: PC_STRESS_SECONDS=N runs each case for N seconds.
 */
#include "harness.h"
#include "mt_stress_util.h"

static const struct scfg small_blocks = { "bs4096-folio64K-mem4M", 0, 4096, 64 * KiB, 4 * MiB };

TEST_FIXTURE(stress_setup, stress_teardown)

TEST_CASE(every_call_at_once_2_threads)
{
	CHECK(stress_case(2, &small_blocks) > 0);
}

TEST_CASE(every_call_at_once_64_threads)
{
	CHECK(stress_case(64, &small_blocks) > 0);
}
