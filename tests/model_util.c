/*
 * model_util.c - the engine of the model-based differential tests
 * (test_model_*.c; model_util.h declares what they use and lists the
 * environment): generating random operations, the fixed scenarios, the
 * cache configurations, and running one of them (model_run).  The
 * operations themselves, the model and the checks of every result are
 * model_util_ops.c's (model_util_internal.h says what the two share).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "model_util_internal.h"

#include <fcntl.h>
#include <stdbool.h>

#include "pagecache.h"

static uint64_t base_seed; /* PC_SEED: every configuration derives its own */

static uint64_t rnd(struct run *r, uint64_t n)
{
	return n ? tu_rand(&r->rng) % n : 0;
}

/* ---------------------------------------------------- operation mix */

/* Weights of the random operations (per mille, roughly). */
static const unsigned op_weights[OP_NKINDS] = {
	[OP_WRITE] = 230,
	[OP_WRITEV] = 100,
	[OP_READ] = 230,
	[OP_READV] = 90,
	[OP_READALL] = 3,
	[OP_TRUNC] = 40,
	[OP_PUNCH] = 40,
	[OP_ZERO] = 20,
	[OP_ZERO_KEEP] = 15,
	[OP_ALLOC] = 5,
	[OP_ALLOC_KEEP] = 5,
	[OP_FSYNC] = 18,
	[OP_FDATASYNC] = 18,
	[OP_REOPEN] = 14,
	[OP_FADV_DONTNEED] = 25,
	[OP_FADV_WILLNEED] = 25,
	[OP_FADV_NOREUSE] = 10,
	[OP_FADV_NORMAL] = 5,
	[OP_VERIFY_DISK] = 2,
	[OP_SPAN_READ] = 90,
	[OP_SPAN_WRITE] = 110,
};

/* ------------------------------------------------------- generation */

static uint64_t gen_len(struct run *r)
{
	uint64_t p = rnd(r, 1000), bs = r->bs;
	if (p < 300)
		return 1 + rnd(r, 64);
	if (p < 440)
		return 1 + rnd(r, 4096);
	if (p < 600) {
		/* a block, page or folio multiple, +-1 */
		uint64_t q = rnd(r, 4);
		uint64_t unit = q == 0 ? 4096 : q == 3 ? r->max_folio : bs;
		uint64_t k = 1 + rnd(r, unit >= 65536 ? 2 : 4);
		uint64_t d = rnd(r, 3);
		uint64_t len = k * unit + d;
		return len > 1 ? len - 1 : 1;
	}
	if (p < 700)
		return bs * (1 + rnd(r, 8));
	if (p < 850)
		return 1 + rnd(r, 64 * KiB);
	if (p < 980)
		return 1 + rnd(r, tu_min_u64(3 * r->max_folio, BIG_LEN));
	return 1 + rnd(r, BIG_LEN);
}

static uint64_t gen_off(struct run *r, uint64_t len)
{
	uint64_t p = rnd(r, 100), bs = r->bs, off;
	uint64_t span = tu_max_u64(r->size, 64 * KiB);
	if (p < 30) {
		off = rnd(r, span + span / 8);
	} else if (p < 55) {
		off = tu_round_down(rnd(r, span + bs), bs);
		uint64_t q = rnd(r, 4);
		if (q == 1)
			off += 1;
		else if (q == 2 && off)
			off -= 1;
		else if (q == 3)
			off += rnd(r, bs);
	} else if (p < 72) {
		/* around end of file */
		uint64_t back = rnd(r, 2 * bs + 2);
		off = (r->size > back ? r->size - back : 0) + rnd(r, 2 * bs + 2);
	} else if (p < 85) {
		off = tu_round_down(rnd(r, MAX_OFF), r->max_folio);
		uint64_t q = rnd(r, 3);
		if (q == 1)
			off += 1;
		else if (q == 2 && off)
			off -= 1;
	} else {
		off = rnd(r, MAX_OFF);
	}
	if (off + len > FILE_CAP)
		off = FILE_CAP - len;
	return off;
}

/* Span flags: those of pc_pread/pc_pwrite but PC_DIRECT. */
static int gen_span_flags(struct run *r, bool read)
{
	uint64_t p = rnd(r, 100);
	if (p < 5)
		return PC_NOWAIT | (rnd(r, 2) ? PC_DONTCACHE : 0);
	if (p < 55)
		return 0;
	if (p < 75)
		return PC_DONTCACHE;
	if (read)
		return PC_DSYNC; /* accepted, as by pc_pread */
	return p < 88 ? PC_DSYNC : PC_DONTCACHE | PC_DSYNC;
}

/* Reads mostly where there is data. */
static uint64_t gen_read_off(struct run *r, uint64_t len)
{
	uint64_t span = tu_max_u64(r->size, 1);
	uint64_t off = rnd(r, 3) == 0 ? tu_round_down(rnd(r, span), r->bs) : rnd(r, span + span / 16);
	return off + len > FILE_CAP ? FILE_CAP - len : off;
}

static int gen_io_flags(struct run *r, bool read)
{
	uint64_t p = rnd(r, 100);
	if (read && p < 3)
		return PC_NOWAIT | (rnd(r, 2) ? PC_DONTCACHE : 0);
	return tu_io_flags_at(p);
}

/* Split len into niov segments at random (zero-length segments allowed),
 * sometimes at or next to block boundaries of the file. */
static void gen_split(struct run *r, struct op *op)
{
	uint64_t cuts[5];
	int n = op->niov;
	cuts[0] = 0;
	cuts[n] = op->len;
	for (int i = 1; i < n; i++) {
		uint64_t q = rnd(r, 4), c;
		if (q == 0) {
			/* at a block boundary (+-1) of the file */
			uint64_t b = tu_round_up(op->off + rnd(r, op->len + 1), r->bs);
			c = b > op->off ? b - op->off : 0;
			c += rnd(r, 3);
			c = c > 0 ? c - 1 : 0;
		} else {
			c = rnd(r, op->len + 1);
		}
		cuts[i] = tu_min_u64(c, op->len);
	}
	/* sort the inner cuts */
	for (int i = 1; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (cuts[j] < cuts[i]) {
				uint64_t t = cuts[i];
				cuts[i] = cuts[j];
				cuts[j] = t;
			}
	for (int i = 0; i < n; i++)
		op->seglen[i] = (uint32_t)(cuts[i + 1] - cuts[i]);
}

static uint32_t gen_pool_off(struct run *r, uint64_t len, bool aligned)
{
	uint64_t o = rnd(r, POOL_SIZE - len + 1);
	if (aligned)
		o = tu_round_down(o, 4096);
	return (uint32_t)o;
}

static void gen_op(struct run *r, struct op *op)
{
	static unsigned total_w;
	if (!total_w)
		for (int i = 0; i < OP_NKINDS; i++)
			total_w += op_weights[i];
	uint64_t p = rnd(r, total_w);
	int k = 0;
	while (p >= op_weights[k]) {
		p -= op_weights[k];
		k++;
	}
	memset(op, 0, sizeof(*op));
	op->kind = k;
	op->h = r->nh > 1 ? (int)rnd(r, 2) : 0;
	op->niov = 1;

	switch (k) {
	case OP_WRITE:
	case OP_WRITEV:
	case OP_READ:
	case OP_READV: {
		bool read = k == OP_READ || k == OP_READV;
		op->flags = gen_io_flags(r, read);
		op->len = gen_len(r);
		if (rnd(r, 300) == 0)
			op->len = 0;
		if (read && rnd(r, 100) < 70)
			op->off = gen_read_off(r, op->len);
		else
			op->off = gen_off(r, op->len);
		/* direct I/O: half of it block aligned, memory too */
		bool aligned = (op->flags & PC_DIRECT) && rnd(r, 2);
		if (aligned) {
			op->off = tu_round_down(op->off, r->bs);
			op->len = tu_round_up(tu_max_u64(op->len, 1), r->bs);
			if (op->len > BIG_LEN)
				op->len = BIG_LEN;
			if (op->off + op->len > FILE_CAP)
				op->off = FILE_CAP - op->len;
		} else if (rnd(r, 4) == 0) {
			aligned = true; /* aligned memory for buffered calls too, sometimes */
		}
		if (k == OP_WRITEV || k == OP_READV) {
			op->niov = 1 + (int)rnd(r, 4);
			if (aligned && rnd(r, 2)) {
				/* block-multiple segments */
				uint64_t nb = op->len / r->bs, left = nb;
				for (int i = 0; i < op->niov; i++) {
					uint64_t take = i == op->niov - 1 ? left : rnd(r, left + 1);
					op->seglen[i] = (uint32_t)(take * r->bs);
					left -= take;
				}
				op->seglen[op->niov - 1] += (uint32_t)(op->len - nb * r->bs);
			} else {
				gen_split(r, op);
			}
		} else {
			op->seglen[0] = (uint32_t)op->len;
		}
		for (int i = 0; i < op->niov; i++) {
			if (read) {
				uint64_t g = aligned ? (i == 0 ? 0 : 4096 - (op->seglen[i - 1] % 4096)) % 4096
						     : (rnd(r, 3) ? rnd(r, 200) : rnd(r, 4096));
				op->where[i] = (uint32_t)g;
			} else {
				op->where[i] = gen_pool_off(r, op->seglen[i], aligned);
			}
		}
		if (read && op->niov == 1)
			op->where[0] = aligned ? 0 : (uint32_t)(rnd(r, 2) ? rnd(r, 16) : rnd(r, 4096));
		break;
	}
	case OP_SPAN_READ:
	case OP_SPAN_WRITE: {
		bool read = k == OP_SPAN_READ;
		op->flags = gen_span_flags(r, read);
		op->len = rnd(r, 300) == 0 ? 0 : gen_len(r);
		op->off = read && rnd(r, 100) < 70 ? gen_read_off(r, op->len) : gen_off(r, op->len);
		op->seglen[0] = (uint32_t)op->len;
		if (!read)
			op->where[0] = gen_pool_off(r, op->len, false);
		op->where[1] = (uint32_t)rnd(r, UINT32_MAX);
		break;
	}
	case OP_TRUNC: {
		uint64_t q = rnd(r, 100), s;
		if (q < 35)
			s = rnd(r, r->size + 1);
		else if (q < 60)
			s = r->size + rnd(r, 2 * r->bs + 1) - tu_min_u64(r->size, r->bs);
		else if (q < 75)
			s = tu_round_down(rnd(r, r->size + 1), r->bs) + rnd(r, 3) - (r->size ? 1 : 0);
		else if (q < 80)
			s = 0;
		else
			s = rnd(r, MAX_OFF + 1);
		if ((int64_t)s < 0)
			s = 0;
		op->off = tu_min_u64(s, FILE_CAP);
		break;
	}
	case OP_PUNCH:
	case OP_ZERO:
	case OP_ZERO_KEEP:
	case OP_ALLOC:
	case OP_ALLOC_KEEP: {
		op->len = gen_len(r);
		uint64_t span = tu_max_u64(r->size, 1);
		if (rnd(r, 100) < 75)
			op->off = rnd(r, 4) == 0 ? tu_round_down(rnd(r, span), r->bs) + rnd(r, 3) : rnd(r, span);
		else
			op->off = gen_off(r, op->len);
		if (op->off + op->len > FILE_CAP)
			op->off = FILE_CAP - op->len;
		break;
	}
	case OP_FADV_DONTNEED:
	case OP_FADV_WILLNEED:
	case OP_FADV_NOREUSE:
	case OP_FADV_NORMAL:
		if (rnd(r, 5) == 0) {
			op->off = 0;
			op->len = 0; /* whole file */
		} else {
			op->len = gen_len(r);
			op->off = rnd(r, tu_max_u64(r->size, 1));
		}
		break;
	case OP_REOPEN: {
		uint64_t q = rnd(r, 100);
		if (r->nh == 2 && q < 50) {
			op->sub = RO_CLOSE_SECOND;
		} else if (r->nh == 1 && q < 30) {
			op->sub = RO_ADD_SECOND;
			op->h = 1;
		} else {
			op->sub = RO_REPLACE;
		}
		uint64_t m = rnd(r, 100);
		op->flags = O_RDWR | (m < 12 ? O_DSYNC : m < 22 ? O_DIRECT : m < 25 ? O_TRUNC : 0);
		break;
	}
	default:
		break;
	}
}

/* ------------------------------------------------------- scenarios */

static struct op mk(int kind, uint64_t off, uint64_t len, int flags)
{
	struct op op;
	memset(&op, 0, sizeof(op));
	op.kind = kind;
	op.off = off;
	op.len = len;
	op.flags = flags;
	op.niov = 1;
	op.seglen[0] = (uint32_t)len;
	/* writes take data from a pool offset that depends on off (varied) */
	if (kind == OP_WRITE || kind == OP_SPAN_WRITE)
		op.where[0] = (uint32_t)((off * 7919 + len * 31) % (POOL_SIZE - len));
	op.where[1] = (uint32_t)(off * 31 + len); /* where a span write cuts */
	return op;
}

#define S(kind, off, len, fl)                                  \
	do {                                                   \
		struct op op_ = mk(kind, off, len, fl);        \
		r->opno++;                                     \
		if (!model_exec(r, &op_))                         \
			return false;                          \
	} while (0)

/* The fixed scenarios, their writes with flags wf: shapes around block
 * and page boundaries and the end of the file that random operations
 * reach only now and then. */
static bool scenarios(struct run *r, int wf)
{
	uint64_t bs = r->bs;
	/* one byte at 4095, read 8192 */
	S(OP_TRUNC, 0, 0, 0);
	S(OP_WRITE, 4095, 1, wf);
	S(OP_READ, 0, 8192, 0);
	S(OP_READ, 4090, 10, wf & ~PC_DSYNC);
	S(OP_FSYNC, 0, 0, 0);
	S(OP_FADV_DONTNEED, 0, 0, 0);
	S(OP_READ, 0, 8192, 0);

	/* a write past EOF leaves a gap that reads as zeros */
	S(OP_TRUNC, 0, 0, 0);
	S(OP_WRITE, 0, 100, wf);
	S(OP_WRITE, 20000, 100, wf);
	S(OP_READ, 100, 19900, 0);
	S(OP_READ, 0, 30000, wf & ~PC_DSYNC);
	S(OP_WRITE, 3 * bs + 5, 10, wf);
	S(OP_READ, 0, 4 * bs, 0);
	S(OP_VERIFY_DISK, 0, 0, 0);

	/* truncate down mid-block, extend, read zeros past the old end */
	for (int synced = 0; synced < 2; synced++) {
		S(OP_TRUNC, 0, 0, 0);
		S(OP_WRITE, 0, 10000, wf);
		if (synced)
			S(OP_FSYNC, 0, 0, 0);
		S(OP_TRUNC, 5000, 0, 0);
		S(OP_TRUNC, 12000, 0, 0);
		S(OP_READ, 0, 12000, 0);
		S(OP_READ, 4990, 20, 0);
		S(OP_FSYNC, 0, 0, 0);
		S(OP_FADV_DONTNEED, 0, 0, 0);
		S(OP_READ, 0, 12000, 0);
		/* the same around a block boundary of this block size */
		S(OP_TRUNC, 0, 0, 0);
		S(OP_WRITE, 0, 3 * bs, wf);
		if (synced)
			S(OP_FSYNC, 0, 0, 0);
		S(OP_TRUNC, bs + bs / 2 + 1, 0, 0);
		S(OP_TRUNC, 3 * bs, 0, 0);
		S(OP_READ, bs, 2 * bs, 0);
		S(OP_VERIFY_DISK, 0, 0, 0);
	}

	/* punch inside a block */
	S(OP_TRUNC, 0, 0, 0);
	S(OP_WRITE, 0, 8192, wf);
	S(OP_PUNCH, 1000, 100, 0);
	S(OP_READ, 0, 8192, 0);
	S(OP_PUNCH, 4000, 200, 0);
	S(OP_READ, 3990, 300, 0);
	S(OP_WRITE, 8192, 2 * bs, wf);
	S(OP_PUNCH, 8192 + bs / 2 - 3, 7, 0);
	S(OP_READ, 0, 8192 + 2 * bs, 0);
	S(OP_VERIFY_DISK, 0, 0, 0);
	S(OP_FADV_DONTNEED, 0, 0, 0);
	S(OP_READ, 0, 8192 + 2 * bs, 0);
	S(OP_PUNCH, bs - 1, 2, 0);
	S(OP_READ, 0, 8192 + 2 * bs, 0);

	/* zero range that extends the file, and one that keeps the size */
	S(OP_TRUNC, 0, 0, 0);
	S(OP_WRITE, 0, 3000, wf);
	S(OP_ZERO, 2000, 5000, 0);
	S(OP_READ, 0, 8000, 0);
	S(OP_ZERO_KEEP, 6000, 4000, 0);
	S(OP_READ, 0, 8000, 0);
	S(OP_WRITE, 7000, 100, wf);
	S(OP_ZERO, 3 * bs - 1, 2, 0);
	S(OP_READ, 0, 3 * bs + 10, 0);
	S(OP_VERIFY_DISK, 0, 0, 0);
	S(OP_FADV_DONTNEED, 0, 0, 0);
	S(OP_READ, 0, 3 * bs + 10, 0);

	/* span writes across the end of the file, some cut short, and
	 * span reads of them from the cache and from the device */
	int sf = wf & ~PC_DIRECT;
	S(OP_TRUNC, 0, 0, 0);
	S(OP_WRITE, 0, 3 * bs, wf);
	for (uint64_t i = 0; i < 8; i++)
		S(OP_SPAN_WRITE, 2 * bs + 7 + i * (bs / 2 + 3), 3 * bs, sf);
	S(OP_SPAN_READ, 0, 8 * bs, 0);
	S(OP_READ, 0, 8 * bs, 0);
	S(OP_VERIFY_DISK, 0, 0, 0);
	S(OP_FADV_DONTNEED, 0, 0, 0);
	S(OP_SPAN_READ, 0, 8 * bs, sf & ~PC_DSYNC);
	return true;
}

/* ---------------------------------------------------- configurations */

/* The cache configurations, one per case (enum model_config, in
 * model_util.h, says how they are numbered). */
static const struct cfgdesc configs[] = {
	[MODEL_BS4096_FOLIO256K] = { "bs4096-folio256K-mem64M", 4096, 256 * KiB, 64 * MiB, 0, 0, 0, 3 },
	[MODEL_BS512_SMALL_MEMORY_FAST_EXPIRY] = { "bs512-folio64K-mem4M-expire20ms", 512, 64 * KiB, 4 * MiB, 0, 20,
						   50, 3 },
	[MODEL_BS16384_FOLIO256K] = { "bs16384-folio256K-mem8M", 16384, 256 * KiB, 8 * MiB, 0, 0, 0, 2 },
	[MODEL_NO_DEFERRED_RMW_CLOSE_TO_OPEN] = { "bs4096-folio64K-mem4M-noRMW-cto", 4096, 64 * KiB, 4 * MiB,
						  PC_CFG_NO_DEFERRED_RMW | PC_CFG_CLOSE_TO_OPEN, 0, 0, 2 },
	[MODEL_NO_EDGE_KEEP_CLOSE_TO_OPEN] = { "bs512-folio256K-mem64M-noedge-cto", 512, 256 * KiB, 64 * MiB,
					       PC_CFG_NO_EDGE_KEEP | PC_CFG_CLOSE_TO_OPEN, 0, 0, 2 },
	[MODEL_NO_DEFERRED_RMW_NO_EDGE_KEEP] = { "bs16384-folio64K-mem4M-noRMW-noedge", 16384, 64 * KiB, 4 * MiB,
						 PC_CFG_NO_DEFERRED_RMW | PC_CFG_NO_EDGE_KEEP, 0, 0, 2 },
	[MODEL_SYNC_IO_SMALL_MEMORY] = { "bs4096-folio256K-mem4M-sync-io", 4096, 256 * KiB, 4 * MiB,
					 PC_CFG_NO_IO_URING, 30, 0, 2 },
	[MODEL_DEFAULTS] = { "defaults", 0, 0, 0, 0, 0, 0, 1 },
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

/* ------------------------------------------------------- one config */
/* Wait (up to 60 s) until nothing is dirty or under write-back and the
 * backing file has the model's size: the flusher settled the closed file.
 * dirty_bytes falls when a write is submitted, not when it completes, so
 * dirty_bytes == 0 alone may still have data in flight. */
static void wait_settled(struct run *r)
{
	for (int i = 0; i < 6000; i++) {
		struct pc_stats st;
		struct stat sb;
		pc_cache_stats(r->c, &st);
		if (st.dirty_bytes == 0 && st.writeback_bytes == 0 && stat(r->path, &sb) == 0 && (uint64_t)sb.st_size == r->size)
			return;
		usleep(10000);
	}
}


static uint64_t nops_total; /* PC_OPS, or the default total */
static bool nops_given;     /* PC_OPS set: the operations of each case */
static bool verbose;        /* PC_VERBOSE */
static const char *dir;     /* the scratch directory */
static uint64_t ops_run;    /* random operations of the cases run */
static double time_run;     /* and the time they took */

/* Returns the random operations it ran. */
static uint64_t run_config(int cfgno, uint64_t seed, uint64_t nops)
{
	struct run rr, *r = &rr;
	memset(r, 0, sizeof(*r));
	r->cd = &configs[cfgno];
	r->cfgno = cfgno;
	r->rng = seed;
	r->verbose = verbose;
	snprintf(r->path, sizeof(r->path), "%s/model-%d", dir, cfgno);

	r->cfg = tu_config(r->cd->memory_limit);
	if (r->cd->block_size)
		r->cfg.block_size = r->cd->block_size;
	if (r->cd->max_folio)
		r->cfg.max_folio_size = r->cd->max_folio;
	if (r->cd->dirty_expire_ms)
		r->cfg.dirty_expire_ms = r->cd->dirty_expire_ms;
	if (r->cd->edge_expire_ms)
		r->cfg.edge_expire_ms = r->cd->edge_expire_ms;
	r->cfg.flags |= r->cd->flags;
	r->max_folio = r->cfg.max_folio_size;

	printf("config %d (%s): seed %llu, %llu ops\n", cfgno, r->cd->name, (unsigned long long)seed,
	       (unsigned long long)nops);
	fflush(stdout);

	r->c = tu_cache_new(&r->cfg);
	r->fh[0] = pc_open(r->c, r->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!r->fh[0] && errno == EINVAL && r->cd->block_size) {
		static char why[128];
		snprintf(why, sizeof(why), "pc_open with block_size %zu fails with EINVAL here", r->cd->block_size);
		CHECK(pc_cache_destroy(r->c) == 0);
		unlink(r->path);
		TEST_SKIP_UNSUPPORTED(why);
	}
	CHECK(r->fh[0] != NULL);
	if (!r->fh[0]) {
		pc_cache_destroy(r->c);
		return 0;
	}
	r->nh = 1;
	r->oflags[0] = O_RDWR;
	struct pc_stats fs;
	pc_file_stats(r->fh[0], &fs);
	r->bs = fs.block_size ? fs.block_size : (r->cd->block_size ? r->cd->block_size : 4096);
	if (r->cd->block_size)
		CHECK(fs.block_size == r->cd->block_size);
	printf("  block size %llu, io_uring %u\n", (unsigned long long)r->bs, fs.io_uring);

	r->model = calloc(1, FILE_CAP + BIG_LEN);
	REQUIRE(r->model);

	double t0 = tu_now_s();
	static const int scen_flags[] = { 0, PC_DONTCACHE, PC_DIRECT, PC_DSYNC, PC_DONTCACHE | PC_DSYNC };
	r->in_scenario = true;
	for (unsigned i = 0; i < sizeof(scen_flags) / sizeof(scen_flags[0]) && !r->failed; i++)
		scenarios(r, scen_flags[i]);
	r->in_scenario = false;
	if (!r->failed)
		tu_passed++;

	uint64_t done = 0;
	uint64_t scen_ops = r->opno;
	r->opno = 0;
	r->nhist = 0;
	struct pc_stats st;
	for (; done < nops && !r->failed; done++) {
		struct op op;
		gen_op(r, &op);
		if (!model_exec(r, &op))
			break;
		r->opno++;
		if ((r->opno & 255) == 0) {
			pc_cache_stats(r->c, &st);
			if (st.cached_bytes > r->cfg.memory_limit) {
				model_fail(r, &op, "cached_bytes %llu > memory_limit %zu",
				     (unsigned long long)st.cached_bytes, r->cfg.memory_limit);
				break;
			}
			if (st.dirty_uncached_bytes > (1ull << 62) || st.dirty_bytes > (1ull << 62)) {
				model_fail(r, &op, "dirty counters went negative: dirty %lld uncached %lld",
				     (long long)st.dirty_bytes, (long long)st.dirty_uncached_bytes);
				break;
			}
		}
	}
	if (!r->failed)
		tu_passed++;
	double t1 = tu_now_s();

	/* close every handle, then the backing file must equal the model */
	bool close_ok = true;
	for (int i = 0; i < r->nh; i++)
		if (r->fh[i] && pc_close(r->fh[i]) != 0)
			close_ok = false;
	r->nh = 0;
	if (!r->failed) {
		CHECK(close_ok);
		/* Close-to-open: written at pc_close.  Else the flusher writes
		 * the closed file and settles its size, with no fsync. */
		if (!(r->cfg.flags & PC_CFG_CLOSE_TO_OPEN))
			wait_settled(r);
		pc_cache_stats(r->c, &st);
		CHECK(st.dirty_bytes == 0);
		CHECK(st.dirty_uncached_bytes == 0);
		if (st.dirty_bytes)
			fprintf(stderr, "  dirty_bytes %llu after pc_close\n", (unsigned long long)st.dirty_bytes);
		r->opno = done;
		if (model_verify_backing(r, NULL, "after pc_close"))
			tu_passed++;
	}
	pc_cache_stats(r->c, &st);
	printf("  %llu scenario + %llu random ops in %.2f s; dev reads %llu ios %llu B, dev writes %llu ios "
	       "%llu B, evictions %llu, dropbehind %llu, edge kept/completed/expired %llu/%llu/%llu, "
	       "deferred_rmw %llu, rmw_reads %llu, throttle_waits %llu, peak dirty %llu, write_errors %llu\n",
	       (unsigned long long)scen_ops, (unsigned long long)done, t1 - t0,
	       (unsigned long long)st.dev_read_ios, (unsigned long long)st.dev_read_bytes,
	       (unsigned long long)st.dev_write_ios, (unsigned long long)st.dev_write_bytes,
	       (unsigned long long)st.evictions, (unsigned long long)st.dropbehind_drops,
	       (unsigned long long)st.edge_kept, (unsigned long long)st.edge_completed,
	       (unsigned long long)st.edge_expired, (unsigned long long)st.deferred_rmw,
	       (unsigned long long)st.rmw_reads, (unsigned long long)st.throttle_waits,
	       (unsigned long long)st.peak_dirty_bytes, (unsigned long long)st.write_errors);
	CHECK(pc_cache_destroy(r->c) == 0);
	unlink(r->path);
	free(r->model);
	fflush(stdout);
	return done;
}

/* A case: the scenarios, then the random operations, in configuration
 * cfgno, with its own seed and its share of the operations. */
void model_run(enum model_config cfgno)
{
	unsigned wsum = 0;
	for (unsigned i = 0; i < NCONFIGS; i++)
		wsum += configs[i].weight;
	uint64_t nops = nops_given ? nops_total : nops_total * configs[cfgno].weight / wsum;
	uint64_t seed = base_seed + ((uint64_t)cfgno + 1) * 0x9e3779b97f4a7c15ull;
	if (!seed)
		seed = 1;
	double t0 = tu_now_s();
	ops_run += run_config((int)cfgno, seed, nops);
	time_run += tu_now_s() - t0;
}

/* The fixture: the base seed (printed), the pool of random bytes that
 * writes take their data from, the buffers, the scratch directory. */
void model_setup(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0); /* progress visible if a run hangs */
	base_seed = test_seed("test_model", 0x6d6f64656c31ull);
	nops_total = tu_quick() ? 24000 : 240000;
	const char *e = getenv("PC_OPS");
	if (e && *e) {
		nops_total = strtoull(e, NULL, 0);
		nops_given = true;
	}
	e = getenv("PC_VERBOSE");
	verbose = e && *e && strcmp(e, "0") != 0;

	model_ops_setup(base_seed);
	dir = test_dir("test_model");
}

/* The total line is what scripts/soak.sh counts operations by. */
void model_teardown(void)
{
	printf("%s: %llu random operations in %.1f s\n", program_invocation_short_name, (unsigned long long)ops_run,
	       time_run);
	test_rmdir(dir);
	model_ops_teardown();
}
