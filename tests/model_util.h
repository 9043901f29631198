/*
 * model_util.h - the model-based differential tests (test_model_*.c), single
 * thread: random operations and fixed scenarios on one file, in one cache
 * configuration per case, checked against a model of the file (the engine
 * is model_util.c, its operations and checks model_util_ops.c).
 *
 * The operations: pc_pwrite / pc_pwritev / pc_pread / pc_preadv /
 * zero-copy spans (pc_read_begin/pc_read_end, pc_write_begin/pc_write_end) /
 * pc_ftruncate / pc_fallocate (punch, zero range, allocate) / pc_fsync /
 * pc_fdatasync / close+reopen / pc_fadvise.  Per-call flags are mixed in at
 * random (0, PC_DSYNC, PC_DONTCACHE, PC_DONTCACHE|PC_DSYNC, PC_DIRECT,
 * PC_DIRECT|PC_DSYNC, and PC_NOWAIT on some reads), as are handles opened
 * with O_DSYNC or O_DIRECT and a second handle of the same file.  At the end
 * of each case the backing file itself (read with plain O_DIRECT) must
 * equal the model, size included.
 *
 * Before the random part each case runs a few fixed scenarios, with each
 * write flag in turn (a byte at 4095, a gap past EOF, truncate down then up
 * mid-block, a punch inside a block, a zero range that extends the file,
 * span writes across the end of the file); the random part starts from the
 * file they leave.
 *
 * Environment:
 *   PC_SEED=n        base seed (printed at start; each configuration derives
 *                    its own seed from it and prints it too)
 *   PC_OPS=n         random operations of each case run (default: the
 *                    case's share, by its weight, of 240000 over all the
 *                    configurations; with PC_TEST_QUICK=1 of 24000)
 *   PC_TEST_QUICK=1  about a tenth of the operations
 *   PC_VERBOSE=1     print every operation (to replay a failure by eye)
 *
 * On the first mismatch a case stops and prints how to replay it:
 * PC_SEED=<base seed> PC_OPS=<op+1> <program> <case>.
 *
 * A test file includes harness.h and this header, holds its cases, each
 * calling model_run() with a configuration, and declares the fixture:
 * TEST_FIXTURE(model_setup, model_teardown).
 */
#ifndef PC_MODEL_UTIL_H
#define PC_MODEL_UTIL_H

/*
 * The cache configurations, one per case.  A configuration's seed derives
 * from the base seed and its place in this list, and its share of the
 * operations from its weight among all of them: add new ones at the end,
 * so that a printed seed keeps replaying the same run.
 */
enum model_config {
	MODEL_BS4096_FOLIO256K,
	MODEL_BS512_SMALL_MEMORY_FAST_EXPIRY,
	MODEL_BS16384_FOLIO256K,
	MODEL_NO_DEFERRED_RMW_CLOSE_TO_OPEN,
	MODEL_NO_EDGE_KEEP_CLOSE_TO_OPEN,
	MODEL_NO_DEFERRED_RMW_NO_EDGE_KEEP,
	MODEL_SYNC_IO_SMALL_MEMORY,
	MODEL_DEFAULTS,
};

/* A case: the fixed scenarios, then the random operations, in
 * configuration cfgno, with its own seed and its share of the operations;
 * at the end the backing file must equal the model.  A mismatch fails the
 * case and says how to replay it. */
void model_run(enum model_config cfgno);

/* The fixture: the base seed (printed), the environment, the pool of
 * random bytes writes take their data from, the buffers and the scratch
 * directory; model_teardown prints the "<program>: N random operations"
 * line scripts/soak.sh counts by, and frees them. */
void model_setup(void);
void model_teardown(void);

#endif
