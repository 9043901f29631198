/*
 * test_model_sizes.c - one file against the model (model_util.h: fixed
 * scenarios, then random operations, every result checked) at block sizes
 * 512, 4096 and 16384 with folios of 64 KiB and 256 KiB: blocks that
 * straddle pages, and pages that straddle blocks.  The cache's options
 * are its defaults; test_model_options.c turns some off.
 *
 * PC_SEED replays a run (its seed is printed); model_util.h lists the
 * environment.
 */
#include "harness.h"
#include "model_util.h"

TEST_FIXTURE(model_setup, model_teardown)

/* 4 KiB blocks, 256 KiB folios, memory for everything. */
TEST_CASE(matches_model_bs4096_folio256k)
{
	model_run(MODEL_BS4096_FOLIO256K);
}

/* 512-byte blocks, 64 KiB folios in 4 MiB of memory (eviction and
 * writeback under pressure), dirty data expiring after 20 ms and edge
 * blocks after 50 ms, so the flusher works while the operations run. */
TEST_CASE(matches_model_bs512_small_memory_fast_expiry)
{
	model_run(MODEL_BS512_SMALL_MEMORY_FAST_EXPIRY);
}

/* 16 KiB blocks, larger than a page, 256 KiB folios in 8 MiB. */
TEST_CASE(matches_model_bs16384_folio256k)
{
	model_run(MODEL_BS16384_FOLIO256K);
}

/* pc_config_init's defaults, the file's own block size. */
TEST_CASE(matches_model_defaults)
{
	model_run(MODEL_DEFAULTS);
}
