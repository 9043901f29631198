/*
 * fuzz_api.c - libFuzzer target: the public API against a byte model.
 *
 * Each input is decoded into one cache configuration and a sequence of up
 * to MAX_OPS calls on one or two files (two handle slots per file) through
 * that cache.  Every file has a model: a byte array and a size.  Every read
 * is compared with the model, pc_size of every open handle after every
 * call, and the backing file itself (read with plain O_DIRECT) after every
 * pc_fsync/pc_fdatasync, after the last pc_close of a file, and after
 * pc_cache_destroy.  Any difference, unexpected return value or errno
 * prints what was expected and calls abort(), so libFuzzer saves the input.
 *
 * Input format (bytes past the end read as 0):
 *   header  4 bytes
 *     h0  bits 0-2 memory_limit (1 + v) MiB (raised to 16 folios),
 *         bits 3-5 max_folio_size 4 KiB << (v % 7),
 *         bits 6-7 block_size 0 / 512 / 1024 / 4096
 *     h1  bit 0 PC_CFG_NO_IO_URING, 1 PC_CFG_NO_DEFERRED_RMW,
 *         2 PC_CFG_NO_EDGE_KEEP, 3 two files, 4 PC_CFG_LAZY_MEMORY,
 *         5-6 dirty_limit_bytes default / 1/16 / 1/4 / 1/2 of memory,
 *         7 PC_CFG_CLOSE_TO_OPEN
 *     h2, h3  size of the data files 0 and 1 hold before the cache opens
 *         them: v * 4111 bytes, written with plain I/O
 *   then operations, each an opcode byte (v % OP_NKINDS) and its operands.
 *   Most operations take a target byte t: bit 0 file, bit 1 handle slot,
 *   bits 2-5 call flags PC_DSYNC / PC_NOWAIT / PC_DONTCACHE / PC_DIRECT,
 *   bit 6 a misaligned user buffer.  Offsets and lengths: see in_off()
 *   and in_len().  Write data is a pattern of the write's number and
 *   offset (tu_fill_pattern), so misplaced data shows.
 *
 * A handle slot that is closed when an operation needs it is opened O_RDWR
 * first.  PC_NOWAIT results are checked as documented: a read may return
 * -1/EAGAIN or a short count, a write -1/EAGAIN (nothing written) or a
 * short count (that prefix written).
 *
 * Environment:
 *   PC_FUZZ_DIR      where the data files go (default: PC_TEST_DIR, else
 *                    the build tree's testdata; not a tmpfs, O_DIRECT)
 *   PC_FUZZ_VERBOSE=1  print every decoded call (to read a crash input)
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <limits.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <sys/uio.h>

#ifndef PC_FUZZ_DEFAULT_DIR
#define PC_FUZZ_DEFAULT_DIR "."
#endif

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)
#define MAX_OFF (4 * MiB)   /* offsets below this */
#define MAX_LEN (512 * KiB) /* largest read or write */
#define FILE_CAP (MAX_OFF + MAX_LEN)
#define MAX_OPS 64
#define NFILES 2
#define NSLOTS 2
#define GUARD 64
#define MAX_IOV 8

enum op_kind {
	OP_WRITE,
	OP_WRITEV,
	OP_READ,
	OP_READV,
	OP_TRUNC,
	OP_FALLOC,
	OP_SYNC,
	OP_FADVISE,
	OP_CLOSE,
	OP_OPEN,
	OP_READ_ALL,
	OP_BADCALL,
	OP_NKINDS
};

struct fz_file {
	char path[4200];
	struct pc_file *h[NSLOTS];
	int oflags[NSLOTS]; /* open flags of each slot's handle */
	uint8_t *data;      /* the model: FILE_CAP bytes, zero past size */
	uint64_t size;
};

struct fz {
	const uint8_t *p;
	size_t n;
	struct pc_cache *c;
	unsigned nfiles;
	struct fz_file f[NFILES];
	struct pc_file *stale; /* a handle closed in this input (EBADF checks) */
	unsigned opno;
	uint64_t wseed;
	bool close_to_open; /* PC_CFG_CLOSE_TO_OPEN: pc_close writes back */
};

static const char *dir;
static bool verbose;
static bool bs_ok[2]; /* block sizes 512 and 1024 work here */
static uint8_t *wbuf, *rbuf;
static struct fz_file files[NFILES];

/* ------------------------------------------------------------ reporting */

static void die(struct fz *z, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(struct fz *z, const char *fmt, ...)
{
	va_list ap;
	int e = errno;
	fprintf(stderr, "fuzz_api: op %u: ", z->opno);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (last errno %d %s)\nfuzz_api: replay with PC_FUZZ_VERBOSE=1 to see the calls\n", e,
		strerror(e));
	abort();
}

static void say(struct fz *z, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct fz *z, const char *fmt, ...)
{
	if (!verbose)
		return;
	va_list ap;
	printf("op %u: ", z->opno);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void expect_err(struct fz *z, long rc, int err, const char *what)
{
	if (rc != -1 || errno != err)
		die(z, "%s returned %ld, expected -1 with errno %d (%s)", what, rc, err, strerror(err));
}

static void expect_ok(struct fz *z, long rc, const char *what)
{
	if (rc != 0)
		die(z, "%s returned %ld, expected 0", what, rc);
}

/* ------------------------------------------------------------ decoding */

static unsigned in_u8(struct fz *z)
{
	if (!z->n)
		return 0;
	z->n--;
	return *z->p++;
}

static unsigned in_u16(struct fz *z)
{
	unsigned v = in_u8(z);
	return v | in_u8(z) << 8;
}

static unsigned in_u24(struct fz *z)
{
	unsigned v = in_u16(z);
	return v | in_u8(z) << 16;
}

/* An offset: page aligned, anywhere, near a page boundary, or near EOF. */
static uint64_t in_off(struct fz *z, uint64_t size)
{
	unsigned mode = in_u8(z) & 3;
	int64_t off;
	switch (mode) {
	case 0:
		off = (int64_t)(in_u16(z) % (MAX_OFF / 4096)) * 4096;
		break;
	case 1:
		off = (int64_t)(in_u24(z) % MAX_OFF);
		break;
	case 2:
		off = (int64_t)in_u8(z) * 4096 + (int8_t)in_u8(z);
		break;
	default:
		off = (int64_t)size + (int16_t)in_u16(z);
		break;
	}
	if (off < 0)
		off = 0;
	return (uint64_t)off % MAX_OFF;
}

/* A length: tiny (0-63), whole 512-byte sectors, any up to 64 KiB, or large. */
static uint64_t in_len(struct fz *z)
{
	unsigned v = in_u8(z);
	switch (v >> 6) {
	case 0:
		return v & 63;
	case 1:
		return ((v & 63) + 1) * 512;
	case 2:
		return in_u16(z) + 1;
	default:
		return ((v & 63) + 1) * 8192;
	}
}

static int io_flags(unsigned t)
{
	static const int bits[] = { PC_DSYNC, PC_NOWAIT, PC_DONTCACHE, PC_DIRECT };
	int flags = 0;
	for (unsigned i = 0; i < 4; i++)
		if (t >> (2 + i) & 1)
			flags |= bits[i];
	return flags;
}

static void flags_str(char *out, size_t n, int flags)
{
	snprintf(out, n, "%s%s%s%s%s", flags ? "" : "0", flags & PC_DSYNC ? "|DSYNC" : "",
		 flags & PC_NOWAIT ? "|NOWAIT" : "", flags & PC_DONTCACHE ? "|DONTCACHE" : "",
		 flags & PC_DIRECT ? "|DIRECT" : "");
}

/* Split len bytes at base into 1-MAX_IOV iovecs (some may be empty). */
static int in_iov(struct fz *z, uint8_t *base, uint64_t len, struct iovec *iov)
{
	int cnt = 1 + (int)(in_u8(z) % MAX_IOV);
	uint64_t left = len;
	for (int i = 0; i < cnt - 1; i++) {
		uint64_t piece = left * in_u8(z) / 255;
		iov[i] = (struct iovec){ base, piece };
		base += piece;
		left -= piece;
	}
	iov[cnt - 1] = (struct iovec){ base, left };
	return cnt;
}

/* ------------------------------------------------------------ model and checks */

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static void model_set_size(struct fz_file *F, uint64_t size)
{
	if (size < F->size)
		memset(F->data + size, 0, F->size - size);
	F->size = size;
}

static void model_zero(struct fz_file *F, uint64_t off, uint64_t end)
{
	if (off < end)
		memset(F->data + off, 0, end - off);
}

static bool any_open(const struct fz_file *F)
{
	for (unsigned s = 0; s < NSLOTS; s++)
		if (F->h[s])
			return true;
	return false;
}

static void check_disk(struct fz *z, struct fz_file *F, const char *when)
{
	if (!tu_verify_disk(F->path, F->data, F->size))
		die(z, "%s: backing file %s differs from the model (size %llu)", when, F->path,
		    (unsigned long long)F->size);
}

static void check_sizes(struct fz *z)
{
	for (unsigned i = 0; i < z->nfiles; i++)
		for (unsigned s = 0; s < NSLOTS; s++) {
			struct fz_file *F = &z->f[i];
			if (!F->h[s])
				continue;
			off_t sz = pc_size(F->h[s]);
			if (sz != (off_t)F->size)
				die(z, "pc_size(file %u slot %u) = %lld, model %llu", i, s, (long long)sz,
				    (unsigned long long)F->size);
		}
}

static void check_read(struct fz *z, const struct fz_file *F, const uint8_t *buf, uint64_t off, uint64_t n,
		       const char *what)
{
	for (uint64_t i = 0; i < n; i++)
		if (buf[i] != F->data[off + i])
			die(z, "%s: byte at file offset %llu is 0x%02x, model 0x%02x (read of %llu bytes at %llu)",
			    what, (unsigned long long)(off + i), buf[i], F->data[off + i], (unsigned long long)n,
			    (unsigned long long)off);
}

/* ------------------------------------------------------------ handles */

static int acc_of(int oflags) { return oflags & O_ACCMODE; }

static void open_slot(struct fz *z, struct fz_file *F, unsigned s, int oflags)
{
	say(z, "pc_open(%s, %s%s%s%s%s%s)", F->path,
	    acc_of(oflags) == O_RDONLY ? "O_RDONLY" : acc_of(oflags) == O_WRONLY ? "O_WRONLY" : "O_RDWR",
	    oflags & O_DSYNC ? "|O_DSYNC" : "", oflags & O_DIRECT ? "|O_DIRECT" : "",
	    oflags & O_TRUNC ? "|O_TRUNC" : "", oflags & O_CREAT ? "|O_CREAT" : "",
	    oflags & O_EXCL ? "|O_EXCL" : "");
	struct pc_file *h = pc_open(z->c, F->path, oflags, 0644);
	if (oflags & O_EXCL) { /* the file exists */
		expect_err(z, h ? 0 : -1, EEXIST, "pc_open(O_CREAT|O_EXCL) of an existing file");
		return;
	}
	if (!h)
		die(z, "pc_open(%s, 0x%x) failed", F->path, oflags);
	F->h[s] = h;
	F->oflags[s] = oflags;
	if (oflags & O_TRUNC)
		model_set_size(F, 0);
}

static void close_slot(struct fz *z, struct fz_file *F, unsigned s)
{
	say(z, "pc_close(%s slot %u)", F->path, s);
	int rc = pc_close(F->h[s]);
	z->stale = F->h[s];
	F->h[s] = NULL;
	expect_ok(z, rc, "pc_close");
	/* Close-to-open: on the device now.  Else the flusher writes it later
	 * (checked after the next fsync, or pc_cache_destroy). */
	if (!any_open(F) && z->close_to_open)
		check_disk(z, F, "after the last pc_close");
}

/* The handle target byte t names (opened O_RDWR if its slot is closed). */
static struct pc_file *pick(struct fz *z, unsigned t, struct fz_file **fp, unsigned *sp)
{
	struct fz_file *F = &z->f[(t & 1) % z->nfiles];
	unsigned s = (t >> 1) & 1;
	if (!F->h[s] && F->h[s ^ 1])
		s ^= 1;
	if (!F->h[s])
		open_slot(z, F, s, O_RDWR);
	*fp = F;
	*sp = s;
	return F->h[s];
}

static uint8_t *user_buf(uint8_t *base, unsigned t)
{
	return base + ((t >> 6 & 1) ? 1 + (t & 3) * 5 : 0);
}

/* ------------------------------------------------------------ operations */

static void op_write(struct fz *z, bool vec)
{
	unsigned t = in_u8(z), s;
	struct fz_file *F;
	struct pc_file *h = pick(z, t, &F, &s);
	int flags = io_flags(t);
	uint64_t off = in_off(z, F->size), len = in_len(z);
	uint8_t *buf = user_buf(wbuf, t);
	tu_fill_pattern(buf, len, ++z->wseed, off);
	struct iovec iov[MAX_IOV];
	int cnt = vec ? in_iov(z, buf, len, iov) : 1;
	if (!vec)
		iov[0] = (struct iovec){ buf, len };
	char fs[64];
	flags_str(fs, sizeof(fs), flags);
	say(z, "%s(%s slot %u, off %llu, len %llu, iovcnt %d, %s)", vec ? "pc_pwritev" : "pc_pwrite", F->path, s,
	    (unsigned long long)off, (unsigned long long)len, cnt, fs);
	ssize_t r = vec ? pc_pwritev(h, iov, cnt, (off_t)off, flags) : pc_pwrite(h, buf, len, (off_t)off, flags);
	if (acc_of(F->oflags[s]) == O_RDONLY) {
		expect_err(z, r, EBADF, "write on an O_RDONLY handle");
		return;
	}
	bool nowait = flags & PC_NOWAIT;
	if (r < 0 && nowait && errno == EAGAIN && len) {
		say(z, "  -> EAGAIN");
		return;
	}
	if (r < 0 || (uint64_t)r > len || (!nowait && (uint64_t)r != len) || (r == 0 && len))
		die(z, "write of %llu bytes at %llu (flags %s) returned %zd", (unsigned long long)len,
		    (unsigned long long)off, fs, r);
	if ((uint64_t)r < len)
		say(z, "  -> short: %zd", r);
	memcpy(F->data + off, buf, (size_t)r);
	if (r)
		F->size = max_u64(F->size, off + (uint64_t)r);
}

static void op_read(struct fz *z, bool vec)
{
	unsigned t = in_u8(z), s;
	struct fz_file *F;
	struct pc_file *h = pick(z, t, &F, &s);
	int flags = io_flags(t);
	uint64_t off = in_off(z, F->size), len = in_len(z);
	uint8_t *buf = user_buf(rbuf, t);
	memset(buf, 0xA5, len + GUARD);
	struct iovec iov[MAX_IOV];
	int cnt = vec ? in_iov(z, buf, len, iov) : 1;
	char fs[64];
	flags_str(fs, sizeof(fs), flags);
	say(z, "%s(%s slot %u, off %llu, len %llu, iovcnt %d, %s)", vec ? "pc_preadv" : "pc_pread", F->path, s,
	    (unsigned long long)off, (unsigned long long)len, cnt, fs);
	ssize_t r = vec ? pc_preadv(h, iov, cnt, (off_t)off, flags) : pc_pread(h, buf, len, (off_t)off, flags);
	if (acc_of(F->oflags[s]) == O_WRONLY) {
		expect_err(z, r, EBADF, "read on an O_WRONLY handle");
		return;
	}
	uint64_t expect = off >= F->size ? 0 : min_u64(len, F->size - off);
	bool nowait = flags & PC_NOWAIT;
	if (r < 0 && nowait && errno == EAGAIN && expect) {
		say(z, "  -> EAGAIN");
		return;
	}
	if (r < 0 || (uint64_t)r > expect || (!nowait && (uint64_t)r != expect) || (r == 0 && expect))
		die(z, "read of %llu bytes at %llu (flags %s, size %llu) returned %zd, expected %llu",
		    (unsigned long long)len, (unsigned long long)off, fs, (unsigned long long)F->size, r,
		    (unsigned long long)expect);
	if ((uint64_t)r < expect)
		say(z, "  -> short: %zd", r);
	check_read(z, F, buf, off, (uint64_t)r, vec ? "pc_preadv" : "pc_pread");
	for (uint64_t i = len; i < len + GUARD; i++)
		if (buf[i] != 0xA5)
			die(z, "read of %llu bytes wrote past the buffer at byte %llu", (unsigned long long)len,
			    (unsigned long long)i);
}

static void op_read_all(struct fz *z)
{
	unsigned t = in_u8(z), s;
	struct fz_file *F;
	struct pc_file *h = pick(z, t, &F, &s);
	if (acc_of(F->oflags[s]) == O_WRONLY)
		return;
	say(z, "read whole file %s slot %u (size %llu)", F->path, s, (unsigned long long)F->size);
	for (uint64_t off = 0; off < F->size; off += MAX_LEN) {
		uint64_t n = min_u64(MAX_LEN, F->size - off);
		ssize_t r = pc_pread(h, rbuf, n, (off_t)off, 0);
		if (r != (ssize_t)n)
			die(z, "pc_pread of %llu bytes at %llu returned %zd", (unsigned long long)n,
			    (unsigned long long)off, r);
		check_read(z, F, rbuf, off, n, "read whole file");
	}
}

static void op_trunc(struct fz *z)
{
	unsigned t = in_u8(z), s;
	struct fz_file *F;
	struct pc_file *h = pick(z, t, &F, &s);
	uint64_t len = in_off(z, F->size);
	say(z, "pc_ftruncate(%s slot %u, %llu)", F->path, s, (unsigned long long)len);
	int rc = pc_ftruncate(h, (off_t)len);
	if (acc_of(F->oflags[s]) == O_RDONLY) {
		expect_err(z, rc, EBADF, "pc_ftruncate on an O_RDONLY handle");
		return;
	}
	expect_ok(z, rc, "pc_ftruncate");
	model_set_size(F, len);
}

static void op_falloc(struct fz *z)
{
	static const int modes[] = { 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				     FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE };
	static const char *names[] = { "0", "KEEP_SIZE", "PUNCH_HOLE|KEEP_SIZE", "ZERO_RANGE",
				       "ZERO_RANGE|KEEP_SIZE" };
	unsigned t = in_u8(z), s;
	struct fz_file *F;
	struct pc_file *h = pick(z, t, &F, &s);
	unsigned k = in_u8(z) % 5;
	int mode = modes[k];
	uint64_t off = in_off(z, F->size), len = in_len(z);
	say(z, "pc_fallocate(%s slot %u, %s, off %llu, len %llu)", F->path, s, names[k], (unsigned long long)off,
	    (unsigned long long)len);
	int rc = pc_fallocate(h, mode, (off_t)off, (off_t)len);
	if (acc_of(F->oflags[s]) == O_RDONLY) {
		expect_err(z, rc, EBADF, "pc_fallocate on an O_RDONLY handle");
		return;
	}
	if (!len) {
		expect_err(z, rc, EINVAL, "pc_fallocate with len 0");
		return;
	}
	expect_ok(z, rc, "pc_fallocate");
	uint64_t end = off + len;
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		model_zero(F, off, (mode & FALLOC_FL_KEEP_SIZE) ? min_u64(end, max_u64(F->size, off)) : end);
	if (!(mode & FALLOC_FL_KEEP_SIZE))
		F->size = max_u64(F->size, end);
}

static void op_sync(struct fz *z)
{
	unsigned t = in_u8(z), s;
	struct fz_file *F;
	struct pc_file *h = pick(z, t, &F, &s);
	bool data = t >> 2 & 1;
	say(z, "%s(%s slot %u)", data ? "pc_fdatasync" : "pc_fsync", F->path, s);
	expect_ok(z, data ? pc_fdatasync(h) : pc_fsync(h), data ? "pc_fdatasync" : "pc_fsync");
	check_disk(z, F, data ? "after pc_fdatasync" : "after pc_fsync");
}

static void op_fadvise(struct fz *z)
{
	static const int advice[] = { POSIX_FADV_DONTNEED, POSIX_FADV_WILLNEED, POSIX_FADV_NOREUSE,
				      POSIX_FADV_NORMAL,   POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM };
	static const char *names[] = { "DONTNEED", "WILLNEED", "NOREUSE", "NORMAL", "SEQUENTIAL", "RANDOM" };
	unsigned t = in_u8(z), s;
	struct fz_file *F;
	struct pc_file *h = pick(z, t, &F, &s);
	unsigned k = in_u8(z) % 6;
	uint64_t off = in_off(z, F->size), len = (t >> 2 & 1) ? 0 : in_len(z);
	say(z, "pc_fadvise(%s slot %u, off %llu, len %llu, %s)", F->path, s, (unsigned long long)off,
	    (unsigned long long)len, names[k]);
	expect_ok(z, pc_fadvise(h, (off_t)off, (off_t)len, advice[k]), "pc_fadvise");
}

static void op_close(struct fz *z)
{
	unsigned t = in_u8(z);
	struct fz_file *F = &z->f[(t & 1) % z->nfiles];
	unsigned s = (t >> 1) & 1;
	if (F->h[s])
		close_slot(z, F, s);
}

/* Open (or close and reopen) a slot with flags from the input. */
static void op_open(struct fz *z)
{
	unsigned t = in_u8(z), o = in_u8(z);
	struct fz_file *F = &z->f[(t & 1) % z->nfiles];
	unsigned s = (t >> 1) & 1;
	if (F->h[s])
		close_slot(z, F, s);
	int oflags = (o & 7) == 0 ? O_RDONLY : (o & 7) == 1 ? O_WRONLY : O_RDWR;
	if (o & 8)
		oflags |= O_DSYNC;
	if (o & 16)
		oflags |= O_DIRECT;
	if ((o & 32) && acc_of(oflags) != O_RDONLY && (o >> 6) == 1) /* RDONLY|O_TRUNC: unspecified */
		oflags |= O_TRUNC;
	if ((o >> 6) >= 2)
		oflags |= O_CREAT | ((o >> 6) == 3 && (o & 32) ? O_EXCL : 0);
	open_slot(z, F, s, oflags);
}

/* Calls the API must refuse, with their errno; nothing may change. */
static void op_badcall(struct fz *z)
{
	unsigned t = in_u8(z), k = in_u8(z) % 10, s;
	struct fz_file *F;
	struct pc_file *h = pick(z, t, &F, &s);
	int acc = acc_of(F->oflags[s]);
	int rd_err = acc == O_WRONLY ? EBADF : EINVAL, wr_err = acc == O_RDONLY ? EBADF : EINVAL;
	uint8_t b[16] = { 0 };
	struct iovec v = { b, sizeof(b) };
	say(z, "bad call %u on %s slot %u", k, F->path, s);
	switch (k) {
	case 0:
		expect_err(z, pc_pwrite(h, b, sizeof(b), 0, 0x100), wr_err, "pc_pwrite with an unknown flag");
		break;
	case 1:
		expect_err(z, pc_pread(h, b, sizeof(b), -1, 0), rd_err, "pc_pread at offset -1");
		break;
	case 2:
		expect_err(z, pc_pwrite(h, NULL, 1, 0, 0), wr_err, "pc_pwrite of a NULL buffer");
		break;
	case 3:
		expect_err(z, pc_preadv(h, &v, IOV_MAX + 1, 0, 0), rd_err, "pc_preadv with IOV_MAX + 1 iovecs");
		break;
	case 4:
		expect_err(z, pc_fallocate(h, 0, 0, 0), acc == O_RDONLY ? EBADF : EINVAL, "pc_fallocate len 0");
		break;
	case 5:
		expect_err(z, pc_ftruncate(h, -1), acc == O_RDONLY ? EBADF : EINVAL, "pc_ftruncate(-1)");
		break;
	case 6:
		expect_err(z, pc_fadvise(h, 0, 0, 12345), EINVAL, "pc_fadvise with bad advice");
		break;
	case 7:
		expect_err(z, pc_pwrite(h, b, sizeof(b), INT64_MAX - 8, 0), acc == O_RDONLY ? EBADF : EFBIG,
			   "pc_pwrite past the largest offset");
		break;
	case 8:
		expect_err(z, pc_fallocate(h, FALLOC_FL_PUNCH_HOLE, 0, 4096), acc == O_RDONLY ? EBADF : EOPNOTSUPP,
			   "pc_fallocate(PUNCH_HOLE without KEEP_SIZE)");
		break;
	default:
		/* A closed handle (kept in quarantine) and NULL are EBADF. */
		expect_err(z, pc_pread(z->stale, b, sizeof(b), 0, 0), EBADF, "pc_pread on a closed handle");
		expect_err(z, (long)pc_size(NULL), EBADF, "pc_size(NULL)");
		break;
	}
}

static void run_op(struct fz *z)
{
	switch (in_u8(z) % OP_NKINDS) {
	case OP_WRITE: op_write(z, false); break;
	case OP_WRITEV: op_write(z, true); break;
	case OP_READ: op_read(z, false); break;
	case OP_READV: op_read(z, true); break;
	case OP_TRUNC: op_trunc(z); break;
	case OP_FALLOC: op_falloc(z); break;
	case OP_SYNC: op_sync(z); break;
	case OP_FADVISE: op_fadvise(z); break;
	case OP_CLOSE: op_close(z); break;
	case OP_OPEN: op_open(z); break;
	case OP_READ_ALL: op_read_all(z); break;
	default: op_badcall(z); break;
	}
	check_sizes(z);
}

/* ------------------------------------------------------------ one input */

static struct pc_config decode_config(struct fz *z, unsigned h0, unsigned h1)
{
	static const size_t block_sizes[] = { 0, 512, 1024, 4096 };
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.max_folio_size = (size_t)4096 << ((h0 >> 3 & 7) % 7);
	cfg.memory_limit = max_u64((1 + (h0 & 7)) * MiB, 16 * cfg.max_folio_size);
	size_t bs = block_sizes[h0 >> 6];
	if ((bs == 512 && !bs_ok[0]) || (bs == 1024 && !bs_ok[1]))
		bs = 4096;
	cfg.block_size = bs;
	static const unsigned cfg_flags[] = { PC_CFG_NO_IO_URING, PC_CFG_NO_DEFERRED_RMW, PC_CFG_NO_EDGE_KEEP };
	for (unsigned i = 0; i < 3; i++)
		if (h1 >> i & 1)
			cfg.flags |= cfg_flags[i];
	if (h1 & 16)
		cfg.flags |= PC_CFG_LAZY_MEMORY;
	if (h1 & 128)
		cfg.flags |= PC_CFG_CLOSE_TO_OPEN;
	z->close_to_open = h1 & 128;
	static const unsigned dirty_div[] = { 0, 16, 4, 2 };
	unsigned d = dirty_div[h1 >> 5 & 3];
	cfg.dirty_limit_bytes = d ? cfg.memory_limit / d : 0;
	say(z, "config: memory_limit %zu KiB, max_folio_size %zu KiB, block_size %zu, flags 0x%x, "
	       "dirty_limit_bytes %zu",
	    cfg.memory_limit / 1024, cfg.max_folio_size / 1024, cfg.block_size, cfg.flags, cfg.dirty_limit_bytes);
	return cfg;
}

/* The data file as it is before the cache sees it: `size` pattern bytes.
 * Written without the fsync of tu_write_file(): a device flush per input
 * would halve the executions per second, and the cache's O_DIRECT reads see
 * the kernel's page cache anyway (direct I/O writes it back first). */
static void prefill(struct fz_file *F, uint64_t size, uint64_t seed)
{
	memset(F->data, 0, FILE_CAP);
	tu_fill_pattern(F->data, size, seed, 0);
	F->size = size;
	int fd = open(F->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(pwrite(fd, F->data, size, 0) == (ssize_t)size);
	close(fd);
	for (unsigned s = 0; s < NSLOTS; s++)
		F->h[s] = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz z = { .p = data, .n = size };
	unsigned h0 = in_u8(&z), h1 = in_u8(&z), p0 = in_u8(&z), p1 = in_u8(&z);
	memcpy(z.f, files, sizeof(files));
	z.nfiles = (h1 & 8) ? 2 : 1;
	struct pc_config cfg = decode_config(&z, h0, h1);
	for (unsigned i = 0; i < z.nfiles; i++) {
		uint64_t n = (uint64_t)(i ? p1 : p0) * 4111;
		prefill(&z.f[i], n, 0xF11E + i);
		say(&z, "file %s: %llu bytes before open", z.f[i].path, (unsigned long long)n);
	}
	z.c = pc_cache_new(&cfg);
	if (!z.c)
		die(&z, "pc_cache_new failed");
	for (z.opno = 1; z.n && z.opno <= MAX_OPS; z.opno++)
		run_op(&z);
	for (unsigned i = 0; i < z.nfiles; i++)
		for (unsigned s = 0; s < NSLOTS; s++)
			if (z.f[i].h[s])
				close_slot(&z, &z.f[i], s);
	say(&z, "pc_cache_destroy");
	expect_ok(&z, pc_cache_destroy(z.c), "pc_cache_destroy");
	for (unsigned i = 0; i < z.nfiles; i++)
		check_disk(&z, &z.f[i], "after pc_cache_destroy");
	return 0;
}

/* ------------------------------------------------------------ setup */

/* Whether a cache with this block size can open a file here (the
 * direct-I/O alignment of the file system may be larger). */
static bool block_size_works(size_t bs)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 4 * MiB;
	cfg.block_size = bs;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	struct pc_file *h = pc_open(c, files[0].path, O_RDWR | O_CREAT, 0644);
	bool ok = h != NULL;
	if (h)
		pc_close(h);
	pc_cache_destroy(c);
	return ok;
}

static void remove_dir(void)
{
	test_rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *base = getenv("PC_FUZZ_DIR");
	if (!base || !*base)
		base = getenv("PC_TEST_DIR");
	if (!base || !*base)
		base = PC_FUZZ_DEFAULT_DIR;
	setenv("PC_TEST_DIR", base, 1);
	dir = test_dir("fuzz_api");
	atexit(remove_dir);
	verbose = getenv("PC_FUZZ_VERBOSE") && atoi(getenv("PC_FUZZ_VERBOSE"));
	for (unsigned i = 0; i < NFILES; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", i);
		test_path(files[i].path, sizeof(files[i].path), dir, name);
		files[i].data = malloc(FILE_CAP);
		REQUIRE(files[i].data);
	}
	REQUIRE(posix_memalign((void **)&wbuf, 4096, MAX_LEN + 4096) == 0);
	REQUIRE(posix_memalign((void **)&rbuf, 4096, MAX_LEN + 4096 + GUARD) == 0);
	bs_ok[0] = block_size_works(512);
	bs_ok[1] = block_size_works(1024);
	unlink(files[0].path);
	return 0;
}
