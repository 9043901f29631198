/*
 * test_model_options.c - one file against the model (model_util.h: fixed
 * scenarios, then random operations, every result checked) with cache
 * options turned off or on: no deferred read-modify-write
 * (PC_CFG_NO_DEFERRED_RMW), no keeping of the edge blocks of uncached
 * writes (PC_CFG_NO_EDGE_KEEP), no io_uring (PC_CFG_NO_IO_URING), and
 * close-to-open writing (PC_CFG_CLOSE_TO_OPEN); most in 4 MiB of memory.
 *
 * PC_SEED replays a run (its seed is printed); model_util.h lists the
 * environment.
 */
#include "harness.h"
#include "model_util.h"

TEST_FIXTURE(model_setup, model_teardown)

/* Partly written blocks read at write time, not deferred; pc_close
 * writes the file back and waits for it. */
TEST_CASE(matches_model_no_deferred_rmw_close_to_open)
{
	model_run(MODEL_NO_DEFERRED_RMW_CLOSE_TO_OPEN);
}

/* 512-byte blocks, edge blocks of uncached writes not kept; pc_close
 * writes the file back and waits for it. */
TEST_CASE(matches_model_no_edge_keep_close_to_open)
{
	model_run(MODEL_NO_EDGE_KEEP_CLOSE_TO_OPEN);
}

/* 16 KiB blocks in 64 KiB folios, 4 MiB of memory, neither deferred
 * read-modify-write nor edge blocks kept. */
TEST_CASE(matches_model_no_deferred_rmw_no_edge_keep)
{
	model_run(MODEL_NO_DEFERRED_RMW_NO_EDGE_KEEP);
}

/* Synchronous I/O instead of io_uring, 4 MiB of memory, dirty data
 * expiring after 30 ms. */
TEST_CASE(matches_model_sync_io_small_memory)
{
	model_run(MODEL_SYNC_IO_SMALL_MEMORY);
}
