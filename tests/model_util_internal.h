/*
 * model_util_internal.h - what the two halves of the model tests' engine
 * share (not for the test files: they include model_util.h).
 * model_util_ops.c: the byte model of the file, running an operation
 * through the cache and checking its results against the model, the
 * backing file; model_util.c: generating random operations, the fixed
 * scenarios, the cache configurations and the run of a case.
 */
#ifndef PC_MODEL_UTIL_INTERNAL_H
#define PC_MODEL_UTIL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "model_util.h"
#include "pagecache.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define MAX_OFF (4 * MiB)    /* random offsets mostly below this */
#define FILE_CAP (6 * MiB)   /* no operation reaches past this */
#define BIG_LEN (1 * MiB)    /* largest single read or write */
#define POOL_SIZE (8 * MiB)  /* random bytes writes take their data from */
#define DST_SIZE (BIG_LEN + 64 * KiB)
#define GUARD 64
#define HIST 24

enum op_kind {
	OP_WRITE,
	OP_WRITEV,
	OP_READ,
	OP_READV,
	OP_READALL,
	OP_TRUNC,
	OP_PUNCH,
	OP_ZERO,
	OP_ZERO_KEEP,
	OP_ALLOC,
	OP_ALLOC_KEEP,
	OP_FSYNC,
	OP_FDATASYNC,
	OP_REOPEN,
	OP_FADV_DONTNEED,
	OP_FADV_WILLNEED,
	OP_FADV_NOREUSE,
	OP_FADV_NORMAL,
	OP_VERIFY_DISK,
	OP_SPAN_READ,
	OP_SPAN_WRITE,
	OP_NKINDS
};

/* Reopen kinds, in op.flags of OP_REOPEN. */
enum { RO_REPLACE, RO_ADD_SECOND, RO_CLOSE_SECOND };

struct op {
	int kind;
	int h;               /* handle index (0 or 1) */
	int flags;           /* PC_* call flags; open flags for OP_REOPEN */
	int sub;             /* OP_REOPEN: RO_* */
	uint64_t off, len;
	int niov;
	uint32_t seglen[4];
	uint32_t where[4];   /* writes: pool offsets; reads: gap before segment;
			      * span writes: [1] seeds where they cut */
};

struct cfgdesc {
	const char *name;
	size_t block_size;     /* 0: the file's own */
	size_t max_folio;      /* 0: default */
	size_t memory_limit;   /* 0: default */
	unsigned flags;        /* PC_CFG_* */
	unsigned dirty_expire_ms;
	unsigned edge_expire_ms;
	unsigned weight;       /* share of the operations */
};

struct run {
	const struct cfgdesc *cd;
	int cfgno;
	struct pc_config cfg;
	struct pc_cache *c;
	struct pc_file *fh[2];
	int oflags[2];
	int nh;
	char path[4200];
	uint8_t *model;
	uint64_t size;
	uint64_t rng;
	uint64_t bs;
	uint64_t max_folio;
	uint64_t opno;
	bool failed;
	bool verbose;
	bool in_scenario;
	struct op hist[HIST];
	uint64_t hist_no[HIST];
	unsigned nhist;
	uint64_t counts[OP_NKINDS];
};

/* Run op through the cache and check its results against the model;
 * false on the first mismatch (reported by model_fail). */
bool model_exec(struct run *r, const struct op *op);

/* Report a mismatch of run r at op (NULL: none): the operation, the
 * handles, the last operations and how to replay it; counts a failure and
 * returns false. */
bool model_fail(struct run *r, const struct op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The backing file, read with plain O_DIRECT, must equal the model, size
 * included; `when` names the moment in the report. */
bool model_verify_backing(struct run *r, const struct op *op, const char *when);

/* The buffers of the operations and the pool of random bytes, from the
 * base seed (printed by the replay lines); freed by model_ops_teardown. */
void model_ops_setup(uint64_t seed);
void model_ops_teardown(void);

#endif
