/*
 * mt_stress_util_calls.c - the calls the stress tests' threads make
 * (mt_stress_util.c runs the rounds and says what is checked; what the
 * two share is in mt_stress_util_internal.h).
 *
 * Each worker draws calls at random by weight (op_weight) on random
 * ranges, biased toward the ends of its region, the floor and the end of
 * the shared zone: the blocks that neighbours share.  It checks each
 * call's result at once (wfail on the first wrong one) and keeps the
 * model of its own regions.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "mt_stress_util_internal.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/uio.h>

#include "pagecache.h"

/* Weights per operation (relative); PC_STRESS_SKIP zeroes some. */
static unsigned op_weight[OP_COUNT] = {
	[OP_PREAD] = 170,      [OP_PREADV] = 60,     [OP_PWRITE] = 200,      [OP_PWRITEV] = 70,
	[OP_FTRUNCATE] = 30,   [OP_FALLOC] = 8,      [OP_FALLOC_KEEP] = 8,   [OP_PUNCH] = 30,
	[OP_ZERO] = 20,        [OP_ZERO_KEEP] = 20,  [OP_FSYNC] = 8,         [OP_FDATASYNC] = 8,
	[OP_ADV_DONTNEED] = 25, [OP_ADV_WILLNEED] = 20, [OP_ADV_NOREUSE] = 6, [OP_ADV_NORMAL] = 6,
	[OP_OPEN] = 15,        [OP_CLOSE] = 15,      [OP_SIZE] = 15,         [OP_CACHE_STATS] = 8,
	[OP_FILE_STATS] = 8,
};

/* Where an I/O goes. */
enum target { TG_OWN, TG_SHARED, TG_FOREIGN, TG_ANY };
static const char target_ch[] = "osfa";

static uint64_t rnd(struct worker *w, uint64_t n)
{
	return n ? tu_rand(&w->rng) % n : 0;
}

static const char *oflags_str(int of)
{
	if ((of & O_ACCMODE) == O_RDONLY)
		return "O_RDONLY";
	if (of & O_DSYNC)
		return "O_RDWR|O_DSYNC";
	if (of & O_DIRECT)
		return "O_RDWR|O_DIRECT";
	return "O_RDWR";
}

/* ------------------------------------------------------ ranges, flags */

static uint64_t gen_len(struct worker *w, uint64_t max)
{
	uint64_t p = rnd(w, 100), len;
	if (p < 25)
		len = 1 + rnd(w, 64);
	else if (p < 45)
		len = 1 + rnd(w, 4096);
	else if (p < 65)
		len = (1 + rnd(w, 3)) * (rnd(w, 2) ? bs : 4096) - 1 + rnd(w, 3);
	else if (p < 90)
		len = 1 + rnd(w, 64 * KiB);
	else
		len = 1 + rnd(w, MAX_IO);
	len = tu_min_u64(len, MAX_IO);
	return tu_min_u64(len, max);
}

/* A range inside [lo, hi), biased toward its ends (blocks shared with
 * the neighbours' regions, the floor, the zone's end). */
static void gen_range_in(struct worker *w, uint64_t lo, uint64_t hi, uint64_t *off, uint64_t *len)
{
	uint64_t span = hi - lo;
	uint64_t l = gen_len(w, span);
	uint64_t p = rnd(w, 100), o;
	if (p < 25)
		o = rnd(w, 3) ? 0 : rnd(w, bs);
	else if (p < 50)
		o = span - l - (rnd(w, 3) ? 0 : tu_min_u64(rnd(w, bs), span - l));
	else
		o = rnd(w, span - l + 1);
	if (o + l > span)
		o = span - l;
	*off = lo + o;
	*len = l;
}

static void gen_range(struct worker *w, enum target tg, uint64_t *off, uint64_t *len)
{
	switch (tg) {
	case TG_OWN:
		gen_range_in(w, own_start(w->t), own_start(w->t) + P, off, len);
		return;
	case TG_SHARED:
		gen_range_in(w, floor_, floor_ + SHARED, off, len);
		return;
	case TG_FOREIGN:
		gen_range_in(w, 0, floor_, off, len);
		return;
	case TG_ANY:
		gen_range_in(w, 0, floor_ + SHARED + READ_PAST, off, len);
		return;
	}
}

static int skip_flags; /* PC_STRESS_SKIP: flags never used */

static int gen_flags(struct worker *w)
{
	static const int base[] = { 0,         0,         0,         PC_DONTCACHE, PC_DONTCACHE,
				    PC_DSYNC,  PC_DIRECT, PC_DIRECT, PC_DONTCACHE | PC_DSYNC, PC_DIRECT | PC_DSYNC };
	int fl = base[rnd(w, sizeof(base) / sizeof(base[0]))];
	if (rnd(w, 7) == 0)
		fl |= PC_NOWAIT;
	return fl & ~skip_flags;
}

/* Direct I/O of whole blocks half the time: shrink to the aligned middle. */
static void maybe_align(struct worker *w, int flags, uint64_t *off, uint64_t *len)
{
	if (!(flags & PC_DIRECT) || rnd(w, 2))
		return;
	uint64_t a = tu_round_up(*off, bs), b = tu_round_down(*off + *len, bs);
	if (b > a) {
		*off = a;
		*len = b - a;
	}
}

/* The shared handle or this thread's extra one; *ro: opened O_RDONLY. */
static struct pc_file *pick_handle(struct worker *w, int file, bool *ro, int *oflags)
{
	if (w->extra[file] && rnd(w, 2)) {
		*ro = (w->extra_oflags[file] & O_ACCMODE) == O_RDONLY;
		*oflags = w->extra_oflags[file];
		return w->extra[file];
	}
	*ro = false;
	*oflags = O_RDWR;
	return main_f[file];
}

/* The flags a call really runs with (the handle's open flags added). */
static int effective(int flags, int oflags)
{
	if (oflags & O_DSYNC)
		flags |= PC_DSYNC;
	if (oflags & O_DIRECT)
		flags |= PC_DIRECT;
	return flags;
}

/* Cut [0, len) into 1 to 4 pieces; cuts[0] = 0, cuts[n] = len. */
static int gen_cuts(struct worker *w, uint64_t len, bool vec, uint64_t cuts[5])
{
	int n = vec ? 1 + (int)rnd(w, 4) : 1;
	cuts[0] = 0;
	cuts[n] = len;
	for (int i = 1; i < n; i++)
		cuts[i] = rnd(w, len + 1);
	for (int i = 1; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (cuts[j] < cuts[i]) {
				uint64_t x = cuts[i];
				cuts[i] = cuts[j];
				cuts[j] = x;
			}
	return n;
}

/* ------------------------------------------------------ the calls */

/*
 * Reads of bytes other threads write, punch or truncate at the same time
 * (the shared zone, the others' regions) are data races in C's terms, as
 * concurrent pread and pwrite of one range are: the cache copies data out
 * without the folio lock, as the kernel does, and TSan reports each one.
 * Under TSan (or PC_STRESS_OWN_READS=1) threads read their own regions
 * only, so that a report is a race the library must not have.
 */
static bool racy_reads_off = TU_TSAN;

static void do_read(struct worker *w, bool vec)
{
	static const enum target tgs[] = { TG_OWN, TG_OWN, TG_OWN, TG_OWN, TG_SHARED, TG_SHARED, TG_ANY, TG_FOREIGN };
	enum target tg = tgs[rnd(w, 8)];
	if (racy_reads_off)
		tg = TG_OWN;
	int file = (int)rnd(w, NFILES);
	uint64_t off, len;
	gen_range(w, tg, &off, &len);
	int flags = gen_flags(w) & ~PC_DSYNC;
	maybe_align(w, flags, &off, &len);
	bool ro;
	int oflags;
	struct pc_file *f = pick_handle(w, file, &ro, &oflags);
	uint8_t *buf = w->buf + (rnd(w, 2) ? 0 : rnd(w, 4096));
	uint8_t canary = (uint8_t)(0x5a ^ w->done);
	memset(buf, canary, len + GUARD);
	uint64_t cuts[5];
	int niov = gen_cuts(w, len, vec, cuts);
	struct iovec iov[4];
	for (int i = 0; i < niov; i++)
		iov[i] = (struct iovec){ buf + cuts[i], cuts[i + 1] - cuts[i] };

	op_begin(w, vec ? OP_PREADV : OP_PREAD, file, target_ch[tg], off, len, effective(flags, oflags));
	ssize_t n = vec ? pc_preadv(f, iov, niov, (off_t)off, flags) : pc_pread(f, buf, len, (off_t)off, flags);
	op_end(w, n);

	if (n < 0) {
		if ((flags & PC_NOWAIT) && errno == EAGAIN) {
			w->eagain++;
			return;
		}
		wfail(w, "read failed");
		return;
	}
	uint64_t max_end = floor_ + SHARED;
	uint64_t most = off >= max_end ? 0 : tu_min_u64(len, max_end - off);
	uint64_t least = off >= floor_ ? 0 : tu_min_u64(len, floor_ - off);
	if ((uint64_t)n > most) {
		wfail(w, "returned %zd, past the largest size %llu", n, (unsigned long long)max_end);
		return;
	}
	if ((uint64_t)n < least) {
		if (!(flags & PC_NOWAIT) || n == 0) {
			wfail(w, "returned %zd, short of the floor %llu (at least %llu)", n, (unsigned long long)floor_,
			      (unsigned long long)least);
			return;
		}
		w->short_nowait++;
	}
	for (unsigned i = 0; i < GUARD; i++)
		if (buf[len + i] != canary) {
			wfail(w, "wrote past the end of the buffer");
			return;
		}
	for (uint64_t i = (uint64_t)n; i < len; i++)
		if (buf[i] != canary) {
			wfail(w, "wrote byte %llu of the buffer past the count it returned", (unsigned long long)i);
			return;
		}
	uint64_t bad;
	char msg[400];
	if (!content_ok(file, off, buf, (uint64_t)n, w->t, w->t + 1, &bad, msg, sizeof(msg)))
		wfail(w, "%s", msg);
}

/* Writes go to the own region (data from the pool, into the model) or to
 * the shared zone (the shared pattern). */
static void do_write(struct worker *w, bool vec)
{
	enum target tg = rnd(w, 3) ? TG_OWN : TG_SHARED;
	int file = (int)rnd(w, NFILES);
	uint64_t off, len;
	gen_range(w, tg, &off, &len);
	int flags = gen_flags(w);
	maybe_align(w, flags, &off, &len);
	bool ro;
	int oflags;
	struct pc_file *f = pick_handle(w, file, &ro, &oflags);
	uint64_t cuts[5];
	int niov = gen_cuts(w, len, vec, cuts);
	struct iovec iov[4];
	bool aligned_mem = rnd(w, 2);
	for (int i = 0; i < niov; i++) {
		uint64_t sl = cuts[i + 1] - cuts[i];
		const uint8_t *src;
		if (tg == TG_SHARED) {
			src = spat[file] + (off + cuts[i] - floor_);
		} else {
			uint64_t po = rnd(w, POOL_SIZE - sl + 1);
			src = pool + (aligned_mem ? tu_round_down(po, 4096) : po);
		}
		iov[i] = (struct iovec){ (void *)src, sl };
	}

	op_begin(w, vec ? OP_PWRITEV : OP_PWRITE, file, target_ch[tg], off, len, effective(flags, oflags));
	ssize_t n = vec ? pc_pwritev(f, iov, niov, (off_t)off, flags)
			: pc_pwrite(f, iov[0].iov_base, len, (off_t)off, flags);
	op_end(w, n);

	if (ro) {
		if (n != -1 || errno != EBADF)
			wfail(w, "a write through an O_RDONLY handle returned %zd, expected -1/EBADF", n);
		else
			w->ebadf_ro++;
		return;
	}
	if (n < 0) {
		if ((flags & PC_NOWAIT) && errno == EAGAIN) {
			w->eagain++;
			return;
		}
		wfail(w, "write failed");
		return;
	}
	if ((uint64_t)n > len || ((uint64_t)n < len && !(flags & PC_NOWAIT)) || (n == 0 && len)) {
		wfail(w, "returned %zd, expected %llu", n, (unsigned long long)len);
		return;
	}
	if ((uint64_t)n < len)
		w->short_nowait++;
	if (tg != TG_OWN)
		return;
	/* the model takes exactly the bytes the call says it wrote */
	uint64_t o = off - own_start(w->t), left = (uint64_t)n;
	for (int i = 0; i < niov && left; i++) {
		uint64_t c = tu_min_u64(iov[i].iov_len, left);
		memcpy(w->model[file] + o, iov[i].iov_base, c);
		o += c;
		left -= c;
	}
}

/* Expect 0, or -1/EBADF through a read-only handle. */
static void expect_zero(struct worker *w, int rc, bool ro)
{
	if (ro) {
		if (rc != -1 || errno != EBADF)
			wfail(w, "returned %d through an O_RDONLY handle, expected -1/EBADF", rc);
		else
			w->ebadf_ro++;
	} else if (rc != 0) {
		wfail(w, "returned %d", rc);
	}
}

static void do_ftruncate(struct worker *w)
{
	int file = (int)rnd(w, NFILES);
	uint64_t p = rnd(w, 10), size;
	if (p < 2)
		size = floor_;
	else if (p < 4)
		size = floor_ + rnd(w, bs); /* inside the block of the floor */
	else
		size = floor_ + rnd(w, SHARED + 1);
	bool ro;
	int oflags;
	struct pc_file *f = pick_handle(w, file, &ro, &oflags);
	op_begin(w, OP_FTRUNCATE, file, 's', size, 0, 0);
	int rc = pc_ftruncate(f, (off_t)size);
	op_end(w, rc);
	expect_zero(w, rc, ro);
}

static void do_fallocate(struct worker *w, int op)
{
	int file = (int)rnd(w, NFILES);
	uint64_t off, len;
	int mode;
	enum target tg;
	switch (op) {
	case OP_FALLOC:
	case OP_FALLOC_KEEP:
		/* allocation changes no data: anywhere, private regions too */
		tg = TG_ANY;
		gen_range_in(w, 0, floor_ + SHARED, &off, &len);
		mode = op == OP_FALLOC ? 0 : FALLOC_FL_KEEP_SIZE;
		break;
	case OP_PUNCH:
		tg = rnd(w, 2) ? TG_OWN : TG_SHARED;
		gen_range(w, tg, &off, &len);
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		break;
	default:
		tg = rnd(w, 2) ? TG_OWN : TG_SHARED;
		gen_range(w, tg, &off, &len);
		mode = FALLOC_FL_ZERO_RANGE | (op == OP_ZERO_KEEP ? FALLOC_FL_KEEP_SIZE : 0);
		break;
	}
	bool ro;
	int oflags;
	struct pc_file *f = pick_handle(w, file, &ro, &oflags);
	op_begin(w, op, file, target_ch[tg], off, len, 0);
	int rc = pc_fallocate(f, mode, (off_t)off, (off_t)len);
	op_end(w, rc);
	expect_zero(w, rc, ro);
	if (rc == 0 && tg == TG_OWN)
		memset(w->model[file] + (off - own_start(w->t)), 0, len);
}

static void do_sync(struct worker *w, int op)
{
	int file = (int)rnd(w, NFILES);
	bool ro;
	int oflags;
	struct pc_file *f = pick_handle(w, file, &ro, &oflags);
	op_begin(w, op, file, 0, 0, 0, 0);
	int rc = op == OP_FSYNC ? pc_fsync(f) : pc_fdatasync(f);
	op_end(w, rc);
	if (rc != 0)
		wfail(w, "returned %d", rc);
}

static void do_fadvise(struct worker *w, int op)
{
	static const int advice[] = { [OP_ADV_DONTNEED - OP_ADV_DONTNEED] = POSIX_FADV_DONTNEED,
				      [OP_ADV_WILLNEED - OP_ADV_DONTNEED] = POSIX_FADV_WILLNEED,
				      [OP_ADV_NOREUSE - OP_ADV_DONTNEED] = POSIX_FADV_NOREUSE,
				      [OP_ADV_NORMAL - OP_ADV_DONTNEED] = POSIX_FADV_NORMAL };
	int file = (int)rnd(w, NFILES);
	uint64_t off, len;
	gen_range(w, TG_ANY, &off, &len);
	if (rnd(w, 8) == 0)
		len = 0; /* to the end of the file */
	bool ro;
	int oflags;
	struct pc_file *f = pick_handle(w, file, &ro, &oflags);
	op_begin(w, op, file, 'a', off, len, 0);
	int rc = pc_fadvise(f, (off_t)off, (off_t)len, advice[op - OP_ADV_DONTNEED]);
	op_end(w, rc);
	if (rc != 0)
		wfail(w, "returned %d", rc);
}

static void do_open(struct worker *w)
{
	static const int choices[] = { O_RDWR, O_RDWR, O_RDWR | O_DSYNC, O_RDWR | O_DIRECT, O_RDONLY };
	int file = (int)rnd(w, NFILES);
	if (w->extra[file])
		return;
	int of = choices[rnd(w, 5)];
	op_begin(w, OP_OPEN, file, 0, 0, 0, 0);
	struct pc_file *f = pc_open(cache, paths[file], of, 0644);
	op_end(w, f ? 0 : -1);
	if (!f) {
		wfail(w, "pc_open(%s) failed", oflags_str(of));
		return;
	}
	w->extra[file] = f;
	w->extra_oflags[file] = of;
}

static void close_extra(struct worker *w, int file)
{
	op_begin(w, OP_CLOSE, file, 0, 0, 0, 0);
	int rc = pc_close(w->extra[file]);
	op_end(w, rc);
	w->extra[file] = NULL;
	if (rc != 0)
		wfail(w, "pc_close of an extra %s handle returned %d", oflags_str(w->extra_oflags[file]), rc);
}

static void do_size(struct worker *w)
{
	int file = (int)rnd(w, NFILES);
	bool ro;
	int oflags;
	struct pc_file *f = pick_handle(w, file, &ro, &oflags);
	op_begin(w, OP_SIZE, file, 0, 0, 0, 0);
	off_t s = pc_size(f);
	op_end(w, s);
	if (s < (off_t)floor_ || s > (off_t)(floor_ + SHARED))
		wfail(w, "pc_size %lld, outside [%llu, %llu]", (long long)s, (unsigned long long)floor_,
		      (unsigned long long)(floor_ + SHARED));
}

static void do_stats(struct worker *w, int op)
{
	int file = (int)rnd(w, NFILES);
	struct pc_stats st;
	op_begin(w, op, op == OP_FILE_STATS ? file : -1, 0, 0, 0, 0);
	if (op == OP_FILE_STATS) {
		bool ro;
		int oflags;
		pc_file_stats(pick_handle(w, file, &ro, &oflags), &st);
	} else {
		pc_cache_stats(cache, &st);
	}
	op_end(w, 0);
	uint64_t lim = rcfg->memory_limit;
	if (st.cached_bytes > lim || st.dirty_bytes > lim || st.writeback_bytes > lim ||
	    st.folios * 4096 > lim)
		wfail(w, "counters past the memory limit %llu: cached %llu dirty %llu writeback %llu folios %llu",
		      (unsigned long long)lim, (unsigned long long)st.cached_bytes,
		      (unsigned long long)st.dirty_bytes, (unsigned long long)st.writeback_bytes,
		      (unsigned long long)st.folios);
	else if (op == OP_FILE_STATS && st.block_size != bs)
		wfail(w, "pc_file_stats block_size %u, expected %llu", st.block_size, (unsigned long long)bs);
}

static unsigned weight_sum; /* of op_weight[], set before any round */

static int draw_op(struct worker *w)
{
	uint64_t r = rnd(w, weight_sum);
	for (int i = 0; i < OP_COUNT; i++) {
		if (r < op_weight[i])
			return i;
		r -= op_weight[i];
	}
	return OP_PREAD;
}

void *worker_main(void *arg)
{
	struct worker *w = arg;
	while (w->done < w->limit && !w->failed && !atomic_load_explicit(&stop_round, memory_order_relaxed)) {
		int op = draw_op(w);
		switch (op) {
		case OP_PREAD:
		case OP_PREADV:
			do_read(w, op == OP_PREADV);
			break;
		case OP_PWRITE:
		case OP_PWRITEV:
			do_write(w, op == OP_PWRITEV);
			break;
		case OP_FTRUNCATE:
			do_ftruncate(w);
			break;
		case OP_FALLOC:
		case OP_FALLOC_KEEP:
		case OP_PUNCH:
		case OP_ZERO:
		case OP_ZERO_KEEP:
			do_fallocate(w, op);
			break;
		case OP_FSYNC:
		case OP_FDATASYNC:
			do_sync(w, op);
			break;
		case OP_ADV_DONTNEED:
		case OP_ADV_WILLNEED:
		case OP_ADV_NOREUSE:
		case OP_ADV_NORMAL:
			do_fadvise(w, op);
			break;
		case OP_OPEN:
			do_open(w);
			break;
		case OP_CLOSE: {
			int file = (int)rnd(w, NFILES);
			if (w->extra[file])
				close_extra(w, file);
			break;
		}
		case OP_SIZE:
			do_size(w);
			break;
		default:
			do_stats(w, op);
			break;
		}
	}
	for (int i = 0; i < NFILES; i++)
		if (w->extra[i])
			close_extra(w, i);
	return NULL;
}
/*
 * PC_STRESS_SKIP="word,word": leave out the calls whose name contains a
 * word (e.g. "fadvise", "PUNCH", "pc_open") and the flags named by one
 * (DIRECT, NOWAIT, DSYNC, DONTCACHE): to narrow a failure down.
 */
static void apply_skip(const char *list)
{
	static const struct {
		const char *name;
		int flag;
	} fl[] = { { "DIRECT", PC_DIRECT }, { "NOWAIT", PC_NOWAIT }, { "DSYNC", PC_DSYNC }, { "DONTCACHE", PC_DONTCACHE } };
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save, *word = strtok_r(buf, ",", &save); word; word = strtok_r(NULL, ",", &save)) {
		bool is_flag = false, used = false;
		for (size_t i = 0; i < sizeof(fl) / sizeof(fl[0]); i++)
			if (strcmp(word, fl[i].name) == 0) {
				skip_flags |= fl[i].flag;
				is_flag = used = true;
			}
		for (int i = 0; i < OP_COUNT && !is_flag; i++)
			if (strstr(op_names[i], word)) {
				op_weight[i] = 0;
				used = true;
			}
		printf("PC_STRESS_SKIP: %s%s\n", word, used ? "" : " matches nothing");
	}
}

/* The environment's choices, before any round: PC_STRESS_OWN_READS and
 * PC_STRESS_SKIP; then the weights' sum that draw_op draws from. */
void stress_calls_setup(void)
{
	const char *e = getenv("PC_STRESS_OWN_READS");
	if (e && *e)
		racy_reads_off = strcmp(e, "0") != 0;
	e = getenv("PC_STRESS_SKIP");
	if (e && *e)
		apply_skip(e);
	for (int i = 0; i < OP_COUNT; i++)
		weight_sum += op_weight[i];
	REQUIRE(weight_sum > 0);
}
