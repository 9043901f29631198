/*
 * model_util_ops.c - the model tests' operations and their checking
 * (test_model_*.c; model_util.h declares what they use and lists the
 * environment, model_util_internal.h what this file shares with
 * model_util.c, which generates the operations and runs the cases):
 * the operations on one file, its model (a byte array and a size), running
 * an operation through the cache and checking every result against the
 * model, and reading the backing file back with plain O_DIRECT.
 *
 * Reads are compared byte for byte after every call (with canaries around
 * the buffers), pc_size after every operation.  A span write stores its
 * data through the span, then at random commits only part of it (0
 * included) after filling the rest with garbage, which must never show in
 * a read; a span read compares the span's bytes, and checks that no span
 * crosses a folio or the end of the file.
 *
 * On the first mismatch the run prints the operation number, the
 * operation, its offset, length and flags, the first differing byte, the
 * operations before it and how to replay it, and counts a failure.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "model_util_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <time.h>

#include "pagecache.h"

static const char *op_names[OP_NKINDS] = {
	[OP_WRITE] = "pwrite",
	[OP_WRITEV] = "pwritev",
	[OP_READ] = "pread",
	[OP_READV] = "preadv",
	[OP_READALL] = "read-whole-file",
	[OP_TRUNC] = "ftruncate",
	[OP_PUNCH] = "fallocate(PUNCH_HOLE|KEEP_SIZE)",
	[OP_ZERO] = "fallocate(ZERO_RANGE)",
	[OP_ZERO_KEEP] = "fallocate(ZERO_RANGE|KEEP_SIZE)",
	[OP_ALLOC] = "fallocate(0)",
	[OP_ALLOC_KEEP] = "fallocate(KEEP_SIZE)",
	[OP_FSYNC] = "fsync",
	[OP_FDATASYNC] = "fdatasync",
	[OP_REOPEN] = "close/reopen",
	[OP_FADV_DONTNEED] = "fadvise(DONTNEED)",
	[OP_FADV_WILLNEED] = "fadvise(WILLNEED)",
	[OP_FADV_NOREUSE] = "fadvise(NOREUSE)",
	[OP_FADV_NORMAL] = "fadvise(NORMAL)",
	[OP_VERIFY_DISK] = "fsync+verify-backing-file",
	[OP_SPAN_READ] = "pc_read_begin/end",
	[OP_SPAN_WRITE] = "pc_write_begin/end",
};

static uint64_t base_seed; /* PC_SEED: in the replay lines */
static uint8_t *pool;     /* random bytes, the data of every write */
static uint8_t *dst;      /* read buffer, 4 KiB aligned */

/* ------------------------------------------------------------ printing */

static const char *oflags_str(int fl, char *buf, size_t n)
{
	snprintf(buf, n, "O_RDWR%s%s%s", (fl & O_TRUNC) ? "|O_TRUNC" : "",
		 (fl & O_DSYNC) == O_DSYNC ? "|O_DSYNC" : "", (fl & O_DIRECT) ? "|O_DIRECT" : "");
	return buf;
}

static void op_str(const struct op *op, char *buf, size_t n)
{
	char fb[64];
	int k = 0;
	switch (op->kind) {
	case OP_WRITE:
	case OP_WRITEV:
	case OP_READ:
	case OP_READV:
	case OP_SPAN_READ:
	case OP_SPAN_WRITE:
		k = snprintf(buf, n, "%s h%d off=%llu len=%llu end=%llu flags=%s", op_names[op->kind],
			     op->h, (unsigned long long)op->off, (unsigned long long)op->len,
			     (unsigned long long)(op->off + op->len), tu_flags_str(op->flags, fb, sizeof(fb)));
		if (op->kind == OP_WRITEV || op->kind == OP_READV) {
			k += snprintf(buf + k, n - k, " iov=[");
			for (int i = 0; i < op->niov && k < (int)n; i++)
				k += snprintf(buf + k, n - k, "%s%u", i ? "," : "", op->seglen[i]);
			if (k < (int)n)
				snprintf(buf + k, n - k, "]");
		}
		break;
	case OP_REOPEN:
		snprintf(buf, n, "%s h%d %s %s", op_names[op->kind], op->h,
			 op->sub == RO_REPLACE ? "replace" : op->sub == RO_ADD_SECOND ? "open-second" : "close-second",
			 op->sub == RO_CLOSE_SECOND ? "" : oflags_str(op->flags, fb, sizeof(fb)));
		break;
	case OP_FSYNC:
	case OP_FDATASYNC:
	case OP_READALL:
	case OP_VERIFY_DISK:
		snprintf(buf, n, "%s h%d", op_names[op->kind], op->h);
		break;
	case OP_TRUNC:
		snprintf(buf, n, "%s h%d size=%llu", op_names[op->kind], op->h, (unsigned long long)op->off);
		break;
	default:
		snprintf(buf, n, "%s h%d off=%llu len=%llu end=%llu", op_names[op->kind], op->h,
			 (unsigned long long)op->off, (unsigned long long)op->len,
			 (unsigned long long)(op->off + op->len));
		break;
	}
}

static void hist_push(struct run *r, const struct op *op)
{
	unsigned i = r->nhist++ % HIST;
	r->hist[i] = *op;
	r->hist_no[i] = r->opno;
	if (r->verbose) {
		char b[256];
		op_str(op, b, sizeof(b));
		printf("  [%s] #%llu %s (size before %llu)\n", r->cd->name, (unsigned long long)r->opno, b,
		       (unsigned long long)r->size);
	}
}

bool model_fail(struct run *r, const struct op *op, const char *fmt, ...)
{
	char b[256], fb[64];
	va_list ap;
	int e = errno;

	tu_failed++;
	r->failed = true;
	fprintf(stderr, "\n*** MISMATCH in config %d (%s), %s op #%llu, file size (model) %llu, "
		"handles %d\n", r->cfgno, r->cd->name, r->in_scenario ? "scenario" : "random",
		(unsigned long long)r->opno, (unsigned long long)r->size, r->nh);
	for (int i = 0; i < r->nh; i++)
		fprintf(stderr, "    handle h%d opened %s\n", i, oflags_str(r->oflags[i], fb, sizeof(fb)));
	if (op) {
		op_str(op, b, sizeof(b));
		fprintf(stderr, "    op: %s\n", b);
	}
	fprintf(stderr, "    ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (errno at failure %d %s)\n", e, strerror(e));
	unsigned n = r->nhist < HIST ? r->nhist : HIST;
	fprintf(stderr, "    last %u operations:\n", n);
	for (unsigned k = r->nhist - n; k < r->nhist; k++) {
		unsigned i = k % HIST;
		op_str(&r->hist[i], b, sizeof(b));
		fprintf(stderr, "      #%llu %s\n", (unsigned long long)r->hist_no[i], b);
	}
	/* PC_OPS=0: the scenarios only (they run first) */
	fprintf(stderr, "    replay: PC_SEED=%llu PC_OPS=%llu %s %s (PC_VERBOSE=1 lists ops)\n",
		(unsigned long long)base_seed, r->in_scenario ? 0ull : (unsigned long long)r->opno + 1,
		program_invocation_short_name, tu_case_name());
	return false;
}

/* First difference between got and the model at file offset off. */
static bool compare(struct run *r, const struct op *op, const uint8_t *got, uint64_t off, uint64_t n,
		    const char *what)
{
	if (memcmp(got, r->model + off, n) == 0)
		return true;
	uint64_t i = 0, ndiff = 0, last = 0;
	while (got[i] == r->model[off + i])
		i++;
	for (uint64_t j = i; j < n; j++)
		if (got[j] != r->model[off + j]) {
			ndiff++;
			last = j;
		}
	return model_fail(r, op,
		    "%s: first differing byte at file offset %llu (block %llu + %llu): expected 0x%02x got 0x%02x; "
		    "%llu bytes differ, last at file offset %llu",
		    what, (unsigned long long)(off + i), (unsigned long long)((off + i) / r->bs),
		    (unsigned long long)((off + i) % r->bs), r->model[off + i], got[i],
		    (unsigned long long)ndiff, (unsigned long long)(off + last));
}

/* ------------------------------------------------------------ the model */

static void model_write(struct run *r, uint64_t off, const uint8_t *src, uint64_t len)
{
	memcpy(r->model + off, src, len);
	if (len && off + len > r->size)
		r->size = off + len;
}

static void model_zero(struct run *r, uint64_t off, uint64_t len, bool keep_size)
{
	if (keep_size) {
		if (off >= r->size)
			return;
		len = tu_min_u64(len, r->size - off);
	}
	memset(r->model + off, 0, len);
	if (!keep_size && off + len > r->size)
		r->size = off + len;
}

static void model_truncate(struct run *r, uint64_t size)
{
	if (size < r->size)
		memset(r->model + size, 0, r->size - size);
	r->size = size;
}

static uint64_t expect_read(struct run *r, uint64_t off, uint64_t len)
{
	return off >= r->size ? 0 : tu_min_u64(len, r->size - off);
}

/* ------------------------------------------------------- backing file */


/* Compare the backing file, read with plain O_DIRECT, with the model. */
bool model_verify_backing(struct run *r, const struct op *op, const char *when)
{
	size_t size, got;
	uint8_t *disk = tu_load_backing(r->path, &size, &got);
	if (!disk)
		return model_fail(r, op, "%s: open(O_DIRECT) of the backing file failed", when);
	bool ok;
	if (size != r->size)
		ok = model_fail(r, op, "%s: backing file st_size %zu, model size %llu", when, size,
				(unsigned long long)r->size);
	else if (got < size)
		ok = model_fail(r, op, "%s: pread(O_DIRECT) of the backing file read %zu of %zu bytes", when, got,
				size);
	else {
		char what[128];
		snprintf(what, sizeof(what), "%s: backing file (O_DIRECT) content", when);
		ok = compare(r, op, disk, 0, size, what);
	}
	free(disk);
	return ok;
}

/* -------------------------------------------------------- execution */

static bool check_sizes(struct run *r, const struct op *op)
{
	for (int i = 0; i < r->nh; i++) {
		off_t s = pc_size(r->fh[i]);
		if (s < 0 || (uint64_t)s != r->size)
			return model_fail(r, op, "pc_size(h%d) = %lld, model size %llu", i, (long long)s,
				    (unsigned long long)r->size);
	}
	return true;
}

static bool do_read(struct run *r, const struct op *op)
{
	struct pc_file *f = r->fh[op->h];
	uint64_t exp = expect_read(r, op->off, op->len);
	uint8_t canary = (uint8_t)(0x5a ^ r->opno);
	ssize_t n;

	if (op->kind == OP_READ) {
		uint8_t *buf = dst + op->where[0];
		memset(buf, canary, op->len + GUARD);
		n = pc_pread(f, buf, op->len, (off_t)op->off, op->flags);
		if ((op->flags & PC_NOWAIT) && n < 0 && errno == EAGAIN)
			return true;
		if ((op->flags & PC_NOWAIT) && n > 0 && (uint64_t)n < exp)
			exp = (uint64_t)n; /* NOWAIT may return what it could copy */
		if (n < 0 || (uint64_t)n != exp)
			return model_fail(r, op, "pc_pread returned %zd, expected %llu", n, (unsigned long long)exp);
		for (unsigned i = 0; i < GUARD; i++)
			if (buf[op->len + i] != canary)
				return model_fail(r, op, "pc_pread wrote past the end of the buffer (byte %u after)", i);
		return compare(r, op, buf, op->off, exp, "pc_pread data");
	}

	/* preadv: segments at separate places of dst with gaps between */
	struct iovec iov[4];
	uint64_t pos = 0;
	for (int i = 0; i < op->niov; i++) {
		pos += op->where[i];
		iov[i].iov_base = dst + pos;
		iov[i].iov_len = op->seglen[i];
		pos += op->seglen[i];
	}
	memset(dst, canary, pos + GUARD);
	n = pc_preadv(f, iov, op->niov, (off_t)op->off, op->flags);
	if ((op->flags & PC_NOWAIT) && n < 0 && errno == EAGAIN)
		return true;
	if ((op->flags & PC_NOWAIT) && n > 0 && (uint64_t)n < exp)
		exp = (uint64_t)n;
	if (n < 0 || (uint64_t)n != exp)
		return model_fail(r, op, "pc_preadv returned %zd, expected %llu", n, (unsigned long long)exp);
	uint64_t done = 0, p = 0;
	for (int i = 0; i < op->niov; i++) {
		for (uint64_t g = 0; g < op->where[i]; g++)
			if (dst[p + g] != canary)
				return model_fail(r, op, "pc_preadv wrote into the gap before iov %d", i);
		p += op->where[i];
		uint64_t take = tu_min_u64(op->seglen[i], exp - done);
		char what[64];
		snprintf(what, sizeof(what), "pc_preadv data (iov %d)", i);
		if (take && !compare(r, op, dst + p, op->off + done, take, what))
			return false;
		done += take;
		p += op->seglen[i];
	}
	for (unsigned i = 0; i < GUARD; i++)
		if (dst[p + i] != canary)
			return model_fail(r, op, "pc_preadv wrote past the last iov");
	return true;
}

static bool do_write(struct run *r, const struct op *op)
{
	struct pc_file *f = r->fh[op->h];
	ssize_t n;

	if (op->kind == OP_WRITE) {
		const uint8_t *src = pool + op->where[0];
		n = pc_pwrite(f, src, op->len, (off_t)op->off, op->flags);
		if (n < 0 || (uint64_t)n != op->len)
			return model_fail(r, op, "pc_pwrite returned %zd, expected %llu", n, (unsigned long long)op->len);
		model_write(r, op->off, src, op->len);
		return true;
	}
	struct iovec iov[4];
	for (int i = 0; i < op->niov; i++) {
		iov[i].iov_base = pool + op->where[i];
		iov[i].iov_len = op->seglen[i];
	}
	n = pc_pwritev(f, iov, op->niov, (off_t)op->off, op->flags);
	if (n < 0 || (uint64_t)n != op->len)
		return model_fail(r, op, "pc_pwritev returned %zd, expected %llu", n, (unsigned long long)op->len);
	uint64_t off = op->off;
	for (int i = 0; i < op->niov; i++) {
		model_write(r, off, pool + op->where[i], op->seglen[i]);
		off += op->seglen[i];
	}
	return true;
}

/* A span must lie in one folio (of at most the largest size, naturally
 * aligned) and be no longer than asked. */
static bool span_shape_ok(struct run *r, const struct op *op, uint64_t pos, uint64_t want, ssize_t n)
{
	if ((uint64_t)n > want || pos / r->max_folio != (pos + (uint64_t)n - 1) / r->max_folio)
		return model_fail(r, op, "a span of %zd bytes at %llu (asked %llu) leaves its folio", n,
			    (unsigned long long)pos, (unsigned long long)want);
	return true;
}

/* Spans of a handle opened with O_DIRECT are refused. */
static bool span_refused(struct run *r, const struct op *op, ssize_t n)
{
	if (n == -1 && errno == EINVAL)
		return true;
	return model_fail(r, op, "a span of an O_DIRECT handle: %zd, expected -1/EINVAL", n);
}

static bool do_span_read(struct run *r, const struct op *op)
{
	struct pc_file *f = r->fh[op->h];
	uint64_t pos = op->off, end = op->off + expect_read(r, op->off, op->len);
	for (;;) {
		struct pc_span s;
		uint64_t want = op->off + op->len - pos;
		ssize_t n = pc_read_begin(f, (off_t)pos, want, op->flags, &s);
		if (r->oflags[op->h] & O_DIRECT)
			return span_refused(r, op, n);
		if (n < 0 && errno == EAGAIN && (op->flags & PC_NOWAIT))
			return true;
		if (n < 0)
			return model_fail(r, op, "pc_read_begin at %llu failed", (unsigned long long)pos);
		if (n == 0) {
			pc_read_end(&s);
			if (pos != end)
				return model_fail(r, op, "pc_read_begin at %llu returned 0 before the end %llu",
					    (unsigned long long)pos, (unsigned long long)end);
			return true;
		}
		bool ok = span_shape_ok(r, op, pos, want, n);
		if (ok && pos + (uint64_t)n > end)
			ok = model_fail(r, op, "pc_read_begin at %llu: %zd bytes, past the end %llu",
				  (unsigned long long)pos, n, (unsigned long long)end);
		ok = ok && compare(r, op, s.data, pos, (uint64_t)n, "pc_read_begin data");
		pc_read_end(&s);
		if (!ok)
			return false;
		pos += (uint64_t)n;
	}
}

/* Where a span write cuts, from its seed: mostly all of it, sometimes a
 * part (0 included), garbage stored past the cut. */
static size_t span_cut(uint64_t *rng, size_t n)
{
	return tu_rand(rng) % 8 ? n : (size_t)(tu_rand(rng) % (n + 1));
}

static bool do_span_write(struct run *r, const struct op *op)
{
	struct pc_file *f = r->fh[op->h];
	const uint8_t *src = pool + op->where[0];
	uint64_t rng = op->where[1] | 1ull << 40;
	uint64_t pos = op->off, end = op->off + op->len;
	for (unsigned tries = 0; pos < end && tries < 1024; tries++) {
		struct pc_span s;
		ssize_t n = pc_write_begin(f, (off_t)pos, end - pos, op->flags, &s);
		if (r->oflags[op->h] & O_DIRECT)
			return span_refused(r, op, n);
		if (n < 0 && errno == EAGAIN && (op->flags & PC_NOWAIT))
			return true;
		if (n <= 0)
			return model_fail(r, op, "pc_write_begin at %llu returned %zd", (unsigned long long)pos, n);
		if (!span_shape_ok(r, op, pos, end - pos, n)) {
			pc_write_end(&s, 0);
			return false;
		}
		memcpy(s.data, src + (pos - op->off), (size_t)n);
		size_t copied = span_cut(&rng, (size_t)n);
		for (size_t i = copied; i < (size_t)n; i++)
			((uint8_t *)s.data)[i] = (uint8_t)tu_rand(&rng);
		if (pc_write_end(&s, copied) != 0)
			return model_fail(r, op, "pc_write_end(%zu of %zd) at %llu failed", copied, n,
				    (unsigned long long)pos);
		model_write(r, pos, src + (pos - op->off), copied);
		pos += copied;
		if (copied < (size_t)n && tu_rand(&rng) % 2)
			break; /* the writer gives up there */
	}
	return true;
}

static bool read_all(struct run *r, const struct op *op)
{
	struct pc_file *f = r->fh[op->h];
	uint64_t off = 0;
	while (off <= r->size) {
		uint64_t exp = expect_read(r, off, BIG_LEN);
		ssize_t n = pc_pread(f, dst, BIG_LEN, (off_t)off, 0);
		if (n < 0 || (uint64_t)n != exp)
			return model_fail(r, op, "pc_pread(whole file) at %llu returned %zd, expected %llu",
				    (unsigned long long)off, n, (unsigned long long)exp);
		if (!compare(r, op, dst, off, exp, "whole-file read"))
			return false;
		if (!n)
			break;
		off += (uint64_t)n;
	}
	return true;
}

static bool do_reopen(struct run *r, const struct op *op)
{
	int h = op->h;
	if (op->sub == RO_CLOSE_SECOND || op->sub == RO_REPLACE) {
		if (pc_close(r->fh[h]) != 0)
			return model_fail(r, op, "pc_close(h%d) failed", h);
		r->fh[h] = NULL;
		if (op->sub == RO_CLOSE_SECOND) {
			/* keep handles dense: h1 moves to h0 when h0 closed */
			if (h == 0) {
				r->fh[0] = r->fh[1];
				r->oflags[0] = r->oflags[1];
				r->fh[1] = NULL;
			}
			r->nh--;
			return true;
		}
	}
	struct pc_file *f = pc_open(r->c, r->path, op->flags, 0644);
	if (!f)
		return model_fail(r, op, "pc_open failed");
	r->fh[h] = f;
	r->oflags[h] = op->flags;
	if (op->sub == RO_ADD_SECOND)
		r->nh++;
	if (op->flags & O_TRUNC)
		model_truncate(r, 0);
	return true;
}

bool model_exec(struct run *r, const struct op *op)
{
	struct pc_file *f = r->fh[op->h];
	int rc = 0;

	hist_push(r, op);
	r->counts[op->kind]++;
	switch (op->kind) {
	case OP_WRITE:
	case OP_WRITEV:
		if (!do_write(r, op))
			return false;
		break;
	case OP_READ:
	case OP_READV:
		if (!do_read(r, op))
			return false;
		break;
	case OP_READALL:
		if (!read_all(r, op))
			return false;
		break;
	case OP_SPAN_READ:
	case OP_SPAN_WRITE:
		if (!(op->kind == OP_SPAN_READ ? do_span_read(r, op) : do_span_write(r, op)))
			return false;
		break;
	case OP_TRUNC:
		if (pc_ftruncate(f, (off_t)op->off) != 0)
			return model_fail(r, op, "pc_ftruncate failed");
		model_truncate(r, op->off);
		break;
	case OP_PUNCH:
		rc = pc_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)op->off, (off_t)op->len);
		if (rc != 0)
			return model_fail(r, op, "pc_fallocate failed");
		model_zero(r, op->off, op->len, true);
		break;
	case OP_ZERO:
	case OP_ZERO_KEEP: {
		bool keep = op->kind == OP_ZERO_KEEP;
		rc = pc_fallocate(f, FALLOC_FL_ZERO_RANGE | (keep ? FALLOC_FL_KEEP_SIZE : 0), (off_t)op->off,
				  (off_t)op->len);
		if (rc != 0)
			return model_fail(r, op, "pc_fallocate failed");
		model_zero(r, op->off, op->len, keep);
		break;
	}
	case OP_ALLOC:
	case OP_ALLOC_KEEP: {
		bool keep = op->kind == OP_ALLOC_KEEP;
		if (pc_fallocate(f, keep ? FALLOC_FL_KEEP_SIZE : 0, (off_t)op->off, (off_t)op->len) != 0)
			return model_fail(r, op, "pc_fallocate failed");
		if (!keep && op->off + op->len > r->size)
			r->size = op->off + op->len;
		break;
	}
	case OP_FSYNC:
		if (pc_fsync(f) != 0)
			return model_fail(r, op, "pc_fsync failed");
		break;
	case OP_FDATASYNC:
		if (pc_fdatasync(f) != 0)
			return model_fail(r, op, "pc_fdatasync failed");
		break;
	case OP_REOPEN:
		if (!do_reopen(r, op))
			return false;
		break;
	case OP_FADV_DONTNEED:
	case OP_FADV_WILLNEED:
	case OP_FADV_NOREUSE:
	case OP_FADV_NORMAL: {
		int adv = op->kind == OP_FADV_DONTNEED   ? POSIX_FADV_DONTNEED
			  : op->kind == OP_FADV_WILLNEED ? POSIX_FADV_WILLNEED
			  : op->kind == OP_FADV_NOREUSE  ? POSIX_FADV_NOREUSE
							 : POSIX_FADV_NORMAL;
		if (pc_fadvise(f, (off_t)op->off, (off_t)op->len, adv) != 0)
			return model_fail(r, op, "pc_fadvise failed");
		break;
	}
	case OP_VERIFY_DISK:
		if (pc_fsync(f) != 0)
			return model_fail(r, op, "pc_fsync failed");
		if (!model_verify_backing(r, op, "after pc_fsync"))
			return false;
		break;
	default:
		abort();
	}
	return check_sizes(r, op);
}

/* The buffers, and the pool of random bytes that writes take their data
 * from (a function of the base seed). */
void model_ops_setup(uint64_t seed)
{
	base_seed = seed;
	REQUIRE(posix_memalign((void **)&pool, 4096, POOL_SIZE) == 0);
	REQUIRE(posix_memalign((void **)&dst, 4096, DST_SIZE) == 0);
	uint64_t ps = base_seed ^ 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < POOL_SIZE; i += 8) {
		uint64_t v = tu_rand(&ps);
		memcpy(pool + i, &v, 8);
	}
}

void model_ops_teardown(void)
{
	free(pool);
	free(dst);
}
