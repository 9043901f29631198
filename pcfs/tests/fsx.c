/*
 * fsx.c - a random exerciser in the style of xfstests' fsx, run through a
 * pcfs mount: reads, writes (plain and RWF_DSYNC), truncates, punched and
 * zeroed ranges, fsync / fdatasync, close and reopen, MAP_PRIVATE reads,
 * SEEK_DATA / SEEK_HOLE and stat, every result checked against an
 * in-memory model of the file.
 *
 *   pcfs-fsx FILE [OPS [SEED]]      (default 100000 ops; PCFS_FSX_OPS too)
 *
 * On a mismatch it prints the operation log's tail and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAXLEN (8u << 20)
#define MAXIO (300u * 1024)
#define LOGN 64

static uint8_t *model, *buf, *rbuf;
static uint64_t size, rng;
static int fd = -1;
static const char *path;
static char oplog[LOGN][128];
static unsigned long opno;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1DULL;
}

static void logop(const char *fmt, uint64_t a, uint64_t b)
{
	snprintf(oplog[opno % LOGN], sizeof(oplog[0]), "%lu: ", opno);
	size_t n = strlen(oplog[opno % LOGN]);
	snprintf(oplog[opno % LOGN] + n, sizeof(oplog[0]) - n, fmt, (unsigned long long)a, (unsigned long long)b);
}

static void die(const char *what, uint64_t at)
{
	fprintf(stderr, "pcfs-fsx: op %lu: %s (at %llu, size %llu, errno %s); last ops:\n", opno, what,
		(unsigned long long)at, (unsigned long long)size, strerror(errno));
	for (unsigned long i = opno >= LOGN ? opno - LOGN + 1 : 0; i <= opno; i++)
		fprintf(stderr, "  %s\n", oplog[i % LOGN]);
	exit(1);
}

/* A random range: mostly small and misaligned, some large or aligned. */
static void pick(uint64_t *off, uint64_t *len, uint64_t limit)
{
	uint64_t l = rnd() % 4 == 0 ? 1 + rnd() % MAXIO : 1 + rnd() % 9000;
	if (rnd() % 5 == 0)
		l = (l + 4095) & ~4095ull;
	uint64_t o = rnd() % limit;
	if (rnd() % 5 == 0)
		o &= ~4095ull;
	if (o + l > MAXLEN)
		l = MAXLEN - o;
	*off = o;
	*len = l ? l : 1;
}

static void check_read(uint64_t off, uint64_t len)
{
	ssize_t n = pread(fd, rbuf, len, (off_t)off);
	uint64_t want = off >= size ? 0 : (off + len > size ? size - off : len);
	if (n < 0 || (uint64_t)n != want)
		die("short or failed read", off);
	for (uint64_t i = 0; i < want; i++)
		if (rbuf[i] != model[off + i]) {
			fprintf(stderr, "byte %llu: got %02x want %02x\n", (unsigned long long)(off + i), rbuf[i],
				model[off + i]);
			die("read data differs from the model", off + i);
		}
}

static void do_write(uint64_t off, uint64_t len, int dsync)
{
	for (uint64_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(rnd() >> 56) | 1;
	struct iovec v = { buf, len };
	ssize_t n = pwritev2(fd, &v, 1, (off_t)off, dsync ? RWF_DSYNC : 0);
	if (n < 0 || (uint64_t)n != len)
		die("write failed", off);
	memcpy(model + off, buf, len);
	if (off + len > size)
		size = off + len;
}

static void do_truncate(uint64_t ns)
{
	if (ftruncate(fd, (off_t)ns) != 0)
		die("ftruncate failed", ns);
	if (ns < size)
		memset(model + ns, 0, size - ns);
	size = ns;
}

static void do_punch(uint64_t off, uint64_t len, int zero, int keep)
{
	int mode = zero ? FALLOC_FL_ZERO_RANGE | (keep ? FALLOC_FL_KEEP_SIZE : 0)
			: FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	if (fallocate(fd, mode, (off_t)off, (off_t)len) != 0)
		die(zero ? "zero range failed" : "punch hole failed", off);
	uint64_t end = off + len;
	if (!zero || keep)
		end = end < size ? end : size;
	if (off < end)
		memset(model + off, 0, end - off);
	if (zero && !keep && off + len > size)
		size = off + len;
}

static void reopen(void)
{
	if (fd >= 0 && close(fd) != 0)
		die("close reported an error", 0);
	fd = open(path, O_RDWR);
	if (fd < 0)
		die("reopen failed", 0);
}

static void check_stat(void)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != size)
		die("fstat size differs from the model", (uint64_t)st.st_size);
	struct stat st2;
	if (stat(path, &st2) != 0 || (uint64_t)st2.st_size != size)
		die("stat size differs from the model", (uint64_t)st2.st_size);
}

/* SEEK_HOLE must never land on data, SEEK_DATA never skip it. */
static void check_seek(uint64_t off)
{
	if (off >= size)
		return;
	off_t h = lseek(fd, (off_t)off, SEEK_HOLE);
	if (h < (off_t)off || (uint64_t)h > size)
		die("SEEK_HOLE out of range", (uint64_t)h);
	if ((uint64_t)h < size && model[h] != 0)
		die("SEEK_HOLE reported data as a hole", (uint64_t)h);
	off_t d = lseek(fd, (off_t)off, SEEK_DATA);
	uint64_t end = d < 0 ? size : (uint64_t)d;
	if (d < 0 && errno != ENXIO)
		die("SEEK_DATA failed", off);
	for (uint64_t i = off; i < end && i < size; i++)
		if (model[i])
			die("SEEK_DATA skipped data", i);
}

static void check_mmap(uint64_t off, uint64_t len)
{
	if (size == 0)
		return;
	uint64_t start = off % size & ~4095ull;
	uint64_t l = len;
	if (start + l > size)
		l = size - start;
	void *p = mmap(NULL, l, PROT_READ, MAP_PRIVATE, fd, (off_t)start);
	if (p == MAP_FAILED)
		die("MAP_PRIVATE mmap failed", start);
	if (memcmp(p, model + start, l) != 0)
		die("MAP_PRIVATE data differs from the model", start);
	munmap(p, l);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: pcfs-fsx FILE [OPS [SEED]]\n");
		return 2;
	}
	path = argv[1];
	const char *env = getenv("PCFS_FSX_OPS");
	unsigned long ops = argc > 2 ? strtoul(argv[2], NULL, 10) : env ? strtoul(env, NULL, 10) : 100000;
	rng = argc > 3 ? strtoull(argv[3], NULL, 10) : (uint64_t)getpid() * 2654435761u + 1;
	printf("pcfs-fsx: %lu ops, seed %llu\n", ops, (unsigned long long)rng);
	fflush(stdout);
	model = calloc(1, MAXLEN);
	buf = malloc(MAXIO);
	rbuf = malloc(MAXLEN);
	if (!model || !buf || !rbuf)
		return 2;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("open failed", 0);
	uint64_t off, len;
	for (opno = 0; opno < ops; opno++) {
		unsigned r = (unsigned)(rnd() % 1000);
		uint64_t limit = size + size / 4 + 65536 < MAXLEN ? size + size / 4 + 65536 : MAXLEN;
		pick(&off, &len, limit);
		if (r < 330) {
			logop("read %llu +%llu", off, len);
			check_read(off, len);
		} else if (r < 680) {
			logop("write %llu +%llu", off, len);
			do_write(off, len, 0);
		} else if (r < 700) {
			logop("dsync write %llu +%llu", off, len);
			do_write(off, len, 1);
		} else if (r < 760) {
			uint64_t ns = rnd() % limit;
			logop("truncate %llu (%llu)", ns, 0);
			do_truncate(ns);
		} else if (r < 810) {
			logop("punch %llu +%llu", off, len);
			do_punch(off, len, 0, 0);
		} else if (r < 860) {
			int keep = (int)(rnd() & 1);
			logop(keep ? "zero keep %llu +%llu" : "zero %llu +%llu", off, len);
			do_punch(off, len, 1, keep);
		} else if (r < 880) {
			logop("fsync %llu %llu", 0, 0);
			if ((rnd() & 1 ? fsync(fd) : fdatasync(fd)) != 0)
				die("fsync failed", 0);
		} else if (r < 900) {
			logop("close+reopen %llu %llu", 0, 0);
			reopen();
		} else if (r < 930) {
			logop("stat %llu %llu", size, 0);
			check_stat();
		} else if (r < 960) {
			logop("seek %llu %llu", off, 0);
			check_seek(size ? off % size : 0);
		} else if (r < 995) {
			logop("mmap %llu +%llu", off, len);
			check_mmap(off, len);
		} else {
			logop("read all %llu %llu", size, 0);
			check_read(0, size);
		}
	}
	check_read(0, size);
	check_stat();
	if (close(fd) != 0)
		die("final close reported an error", 0);
	printf("pcfs-fsx: %lu ops passed, final size %llu\n", ops, (unsigned long long)size);
	return 0;
}
