/*
 * testutil.h - the helpers every test file shares: scratch directories,
 * caches, data patterns, reading back the device, polls and children
 * (with their watchdogs).  The cases themselves and CHECK/REQUIRE are
 * harness.h's.
 */
#ifndef PC_TESTUTIL_H
#define PC_TESTUTIL_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "pagecache.h"

/*
 * A scratch directory for this test, on the file system of the build tree
 * (which supports O_DIRECT, unlike a tmpfs /tmp).  PC_TEST_DIR overrides.
 * The path is "<dir>/<name>.<pid>"; the caller removes what it creates.
 */
static inline const char *test_dir(const char *name)
{
	static char path[4096];
	const char *base = getenv("PC_TEST_DIR");
	if (!base || !*base)
		base = ".";
	snprintf(path, sizeof(path), "%s/%s.%d", base, name, (int)getpid());
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	return path;
}

static inline void test_path(char *out, size_t n, const char *dir, const char *file)
{
	/* A path that does not fit would name another file: stop there. */
	if ((size_t)snprintf(out, n, "%s/%s", dir, file) >= n) {
		fprintf(stderr, "test path too long: %s/%s\n", dir, file);
		abort();
	}
}

/*
 * TEST_SCRATCH_DIR("name"): the file's cases share a scratch directory,
 * `dir`, made before the first case and removed after the last.
 */
#define TEST_SCRATCH_DIR(name)                                  \
	static const char *dir;                                 \
	static void tu_scratch_setup(void)                      \
	{                                                       \
		dir = test_dir(name);                           \
	}                                                       \
	static void tu_scratch_teardown(void)                   \
	{                                                       \
		test_rmdir(dir);                                \
	}                                                       \
	TEST_FIXTURE(tu_scratch_setup, tu_scratch_teardown)

/* Remove a test directory and the plain files in it. */
static inline void test_rmdir(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* xorshift64*: reproducible random numbers from a printed seed. */
/* A shared cache's object (pagecache.h, shared_name): the name shm_open
 * takes for cache `name`, whether it exists, and its removal (whatever a
 * failed run left). */
static inline void tu_shm_name(char *out, size_t n, const char *name)
{
	snprintf(out, n, "/pagecache-%s", name);
}

static inline bool tu_shm_exists(const char *name)
{
	char path[300];
	tu_shm_name(path, sizeof(path), name);
	int fd = shm_open(path, O_RDONLY, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static inline void tu_shm_unlink(const char *name)
{
	char path[300];
	tu_shm_name(path, sizeof(path), name);
	shm_unlink(path);
}

static inline uint64_t tu_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* The seed: PC_SEED from the environment, else `dflt`; printed either way. */
static inline uint64_t test_seed(const char *name, uint64_t dflt)
{
	const char *s = getenv("PC_SEED");
	uint64_t seed = s ? strtoull(s, NULL, 0) : dflt;
	if (!seed)
		seed = 1;
	printf("%s: seed %llu (replay with PC_SEED=%llu)\n", name,
	       (unsigned long long)seed, (unsigned long long)seed);
	return seed;
}

/* PC_TEST_QUICK=1 (anything but empty or "0"): shorter random runs. */
static inline bool tu_quick(void)
{
	const char *q = getenv("PC_TEST_QUICK");
	return q && *q && strcmp(q, "0") != 0;
}

/* TU_TSAN: 1 in a ThreadSanitizer build; TU_SANITIZED: 1 in an ASan or
 * TSan build (much slower: fewer iterations). */
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif
#if TU_TSAN || defined(__SANITIZE_ADDRESS__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif

/* ------------------------------------------------ small shared helpers */

static inline uint64_t tu_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t tu_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t tu_round_down(uint64_t x, uint64_t a) { return x / a * a; }
static inline uint64_t tu_round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Monotonic time in seconds: for the durations the tests print. */
static inline double tu_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Monotonic time in milliseconds: deadlines of TU_POLL and similar waits. */
static inline uint64_t tu_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Poll `cond` every 10 ms; true once it holds.  Background work (the
 * flusher) is waited for this way, never with bare sleeps.  `ms` is how
 * long it should take; the poll goes on for TU_POLL_MIN_MS at least all
 * the same, a bound that only catches a hang (a loaded machine, a
 * sanitizer build, can hold background work back for seconds: a figure of
 * time is for pcbench, not a test), and says on stderr when it took
 * longer than `ms`.
 */
#define TU_POLL_MIN_MS 60000
#define TU_POLL(cond, ms)                                                                      \
	({                                                                                     \
		bool ok_ = false;                                                              \
		uint64_t t0_ = tu_now_ms(), want_ = (ms);                                      \
		uint64_t until_ = t0_ + tu_max_u64(want_, TU_POLL_MIN_MS);                     \
		for (;;) {                                                                     \
			if (cond) {                                                            \
				ok_ = true;                                                    \
				break;                                                         \
			}                                                                      \
			if (tu_now_ms() > until_)                                              \
				break;                                                         \
			usleep(10000);                                                         \
		}                                                                              \
		uint64_t took_ = tu_now_ms() - t0_;                                            \
		if (took_ > want_)                                                             \
			fprintf(stderr, "%s:%d: %s: %s after %llu ms (expected within %llu)\n",  \
				__FILE__, __LINE__, #cond, ok_ ? "true" : "still false",       \
				(unsigned long long)took_, (unsigned long long)want_);         \
		ok_;                                                                           \
	})

/* Whether the closed file at path is settled within 10 s: written, its
 * attributes saved and its lock released (pc_cache_file_info.unsettled).
 * Only then may another program change it behind the cache's back and be
 * noticed (pagecache.h, "Sharing and other processes"). */
static inline bool tu_settled(struct pc_cache *c, const char *path)
{
	struct stat st;
	struct pc_file_info info;
	return stat(path, &st) == 0 &&
	       TU_POLL(pc_cache_file_info(c, st.st_dev, st.st_ino, &info) == 0 && !info.unsettled, 10000);
}

/* A 64-bit mixer (murmur3 finalizer): the source of the data patterns. */
static inline uint64_t tu_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* The byte at file offset `off` of data pattern `seed`: byte (off & 7) of
 * word (off >> 3), so any range can be regenerated from its offset. */
static inline uint8_t tu_pattern_byte(uint64_t seed, uint64_t off)
{
	return (uint8_t)(tu_mix64(seed * 0x9E3779B97F4A7C15ULL + (off >> 3)) >> ((off & 7) * 8));
}

/* b[0, n) = pattern `seed` at file offsets [off, off + n): the same bytes
 * as tu_pattern_byte, one mix per 8-byte word. */
static inline void tu_fill_pattern(uint8_t *b, size_t n, uint64_t seed, uint64_t off)
{
	uint64_t k = seed * 0x9E3779B97F4A7C15ULL;
	size_t i = 0;
	while (i < n) {
		uint64_t o = off + i;
		uint64_t w = tu_mix64(k + (o >> 3));
		for (unsigned j = (unsigned)(o & 7); j < 8 && i < n; j++)
			b[i++] = (uint8_t)(w >> (j * 8));
	}
}

/* The first i in [0, n) where p[i] is not pattern `seed` at file offset
 * off + i, or n: p holds the pattern there. */
static inline size_t tu_pattern_mismatch(const uint8_t *p, size_t n, uint64_t seed, uint64_t off)
{
	uint8_t want[4096];
	for (size_t i = 0; i < n; i += sizeof(want)) {
		size_t len = (size_t)tu_min_u64(sizeof(want), n - i);
		tu_fill_pattern(want, len, seed, off + i);
		if (memcmp(p + i, want, len) != 0)
			for (size_t j = 0; j < len; j++)
				if (p[i + j] != want[j])
					return i + j;
	}
	return n;
}

/* p[0, n) holds pattern `seed` of file offsets [off, off + n). */
static inline bool tu_is_pattern(const uint8_t *p, size_t n, uint64_t seed, uint64_t off)
{
	return tu_pattern_mismatch(p, n, seed, off) == n;
}

/* The PC_* call flags in fl, for messages: "0" or e.g. "DSYNC|DIRECT". */
static inline const char *tu_flags_str(int fl, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s%s%s%s", fl ? "" : "0", (fl & PC_DSYNC) ? "|DSYNC" : "",
		 (fl & PC_NOWAIT) ? "|NOWAIT" : "", (fl & PC_DONTCACHE) ? "|DONTCACHE" : "",
		 (fl & PC_DIRECT) ? "|DIRECT" : "");
	if (buf[0] == '|')
		memmove(buf, buf + 1, strlen(buf));
	return buf;
}

/* The per-call flags of a read or write drawn at percentile p (0 to 99)
 * of the model tests' mix: none 40%, PC_DSYNC 10%, PC_DONTCACHE 18%,
 * PC_DONTCACHE|PC_DSYNC 7%, PC_DIRECT 17%, PC_DIRECT|PC_DSYNC 8%. */
static inline int tu_io_flags_at(uint64_t p)
{
	if (p < 40)
		return 0;
	if (p < 50)
		return PC_DSYNC;
	if (p < 68)
		return PC_DONTCACHE;
	if (p < 75)
		return PC_DONTCACHE | PC_DSYNC;
	if (p < 92)
		return PC_DIRECT;
	return PC_DIRECT | PC_DSYNC;
}

/* pc_config_init's defaults with this memory limit (0: the default). */
static inline struct pc_config tu_config(size_t memory_limit)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	if (memory_limit)
		cfg.memory_limit = memory_limit;
	return cfg;
}

/* A cache of cfg (NULL: the defaults); the test cannot go on without one. */
static inline struct pc_cache *tu_cache_new(const struct pc_config *cfg)
{
	struct pc_cache *c = pc_cache_new(cfg);
	if (!c) {
		fprintf(stderr, "pc_cache_new: %s\n", strerror(errno));
		exit(1);
	}
	return c;
}

/* A cache with the defaults but its memory limit. */
static inline struct pc_cache *tu_cache_of(size_t memory_limit)
{
	struct pc_config cfg = tu_config(memory_limit);
	return tu_cache_new(&cfg);
}

/* dir/name opened read-write in c, created or truncated to empty. */
static inline struct pc_file *tu_open_new(struct pc_cache *c, const char *dir, const char *name)
{
	char path[4200];
	test_path(path, sizeof(path), dir, name);
	struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	return f;
}

/* The cache's counters, by value (for expressions like tu_stats(c).x). */
static inline struct pc_stats tu_stats(struct pc_cache *c)
{
	struct pc_stats s;
	pc_cache_stats(c, &s);
	return s;
}

/* Create (or truncate) `path` holding data[0, size), written with plain
 * I/O and fsynced: data that exists on the device before a cache sees it. */
static inline void tu_write_file(const char *path, const uint8_t *data, size_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(pwrite(fd, data, size, 0) == (ssize_t)size);
	REQUIRE(fsync(fd) == 0);
	close(fd);
}

/*
 * The whole backing file at path, read with plain O_DIRECT (bypassing the
 * cache) into a fresh 4 KiB-aligned buffer the caller frees, with room for
 * a block past the end (bytes not read are 0xee); its size (st_size) in
 * *size and the bytes read in *got (fewer: a read failed, said on stderr).
 * NULL when it cannot be opened (said on stderr, errno kept).  Checks
 * nothing: what the file must hold is the caller's.
 */
static inline uint8_t *tu_load_backing(const char *path, size_t *size, size_t *got)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		int e = errno;
		fprintf(stderr, "   %s: open(O_DIRECT)/fstat: %s\n", path, strerror(e));
		if (fd >= 0)
			close(fd);
		errno = e;
		return NULL;
	}
	size_t cap = (((size_t)st.st_size + 4095) & ~(size_t)4095) + 4096;
	uint8_t *buf;
	REQUIRE(posix_memalign((void **)&buf, 4096, cap) == 0);
	memset(buf, 0xee, cap);
	size_t n = 0;
	while (n < (size_t)st.st_size) {
		ssize_t r = pread(fd, buf + n, cap - n, (off_t)n);
		if (r < 0)
			fprintf(stderr, "   %s: pread(O_DIRECT) at %zu: %s\n", path, n, strerror(errno));
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	*size = (size_t)st.st_size;
	*got = n;
	return buf;
}

/* tu_load_backing for a file that must be there and read whole: CHECKs
 * that the read is whole. */
static inline uint8_t *tu_read_backing(const char *path, size_t *size)
{
	size_t got;
	uint8_t *buf = tu_load_backing(path, size, &got);
	REQUIRE(buf);
	CHECK(got == *size);
	return buf;
}

/*
 * The backing file, read with plain O_DIRECT, must hold expect[0, size).
 * round_bs 0: and be exactly size bytes long.  Otherwise its size may be
 * anything from size to size rounded up to round_bs, the bytes past size
 * reading as zeros: the durable size before fsync/close (pagecache.h,
 * PC_DSYNC: "rounded up to a block boundary (the extra bytes read as
 * zeros)"; the same holds after the flusher's writeback).  Reports the
 * first difference on stderr.
 */
static inline bool tu_verify_disk_data(const char *path, const uint8_t *expect, size_t size, size_t round_bs)
{
	size_t disk, got;
	uint8_t *buf = tu_load_backing(path, &disk, &got);
	if (!buf)
		return false;
	bool ok = true;
	size_t max_size = round_bs ? (size + round_bs - 1) / round_bs * round_bs : size;
	if (disk < size || disk > max_size) {
		fprintf(stderr, "   %s: backing size %zu, expected %zu%s%zu\n", path, disk, size, round_bs ? " to " : "",
			round_bs ? max_size : (size_t)0);
		ok = false;
	}
	if (ok && got < disk) {
		fprintf(stderr, "   %s: read %zu of %zu bytes\n", path, got, disk);
		ok = false;
	}
	if (ok) {
		for (size_t i = 0; i < size; i++)
			if (buf[i] != expect[i]) {
				fprintf(stderr, "   %s: byte %zu is 0x%02x, expected 0x%02x\n", path, i, buf[i],
					expect[i]);
				ok = false;
				break;
			}
		for (size_t i = size; ok && i < disk; i++)
			if (buf[i] != 0) {
				fprintf(stderr, "   %s: byte %zu past the end %zu is 0x%02x, expected 0\n", path, i,
					size, buf[i]);
				ok = false;
			}
	}
	free(buf);
	return ok;
}

/* ------------------------------------------------ children (fork) */

/*
 * fork() copies only the calling thread: a lock that another thread held
 * at that moment stays held in the child for ever.  glibc's malloc and
 * stdio reset theirs in the child; GCC 12's sanitizer runtimes take no
 * lock around fork and reset nothing.  So in the child of a process with
 * threads (every live pc_cache has some):
 *   - exit() runs LeakSanitizer's check (ASan registers it before main),
 *     which locks the whole ASan allocator and the thread registry: a
 *     test_mt_fork child hung there in about 1 run of 9;
 *   - starting or ending threads (ASan's thread registry and
 *     dead_threads_stats_lock, TSan's "dup thread") can meet such a lock:
 *     a child that starts threads (a cache of its own) must come from a
 *     process with none, tu_fork_alone().
 * A little malloc and free in the child is a risk the tests take: it takes
 * an allocator lock only when its thread cache runs dry or over.
 *
 * tu_exit_guard(), called in the file's fixture setup, before the first
 * PC_CFG_FLUSH_AT_EXIT cache, registers an exit handler that ends a child
 * that tu_fork() made while other threads ran: _exit() with the status the
 * child gave exit(), after fflush(NULL) as exit() would.  Exit handlers run
 * in the reverse order of their registration, so everything the child's
 * exit() is there to do still runs first (the library's own handler, which
 * it registers with the first PC_CFG_FLUSH_AT_EXIT cache, and any the test
 * registers later), and LSan's check, registered before main, never does.
 * test_mt_fork checks the library's handler this way.  A child of a
 * process without threads exits in full, leak check included.
 */
static bool tu_exit_guarded;
static bool tu_child_of_threads; /* set in a child tu_fork() made while threads ran */

static void tu_exit_guard_handler(int status, void *arg)
{
	(void)arg;
	if (tu_child_of_threads) {
		fflush(NULL);
		_exit(status);
	}
}

static inline void tu_exit_guard(void)
{
	REQUIRE(on_exit(tu_exit_guard_handler, NULL) == 0);
	tu_exit_guarded = true;
}

/* The threads of this process (its "Threads:" in /proc/self/status). */
static inline unsigned tu_threads(void)
{
	FILE *fp = fopen("/proc/self/status", "re");
	REQUIRE(fp);
	char line[256];
	unsigned n = 0;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "Threads: %u", &n) == 1)
			break;
	fclose(fp);
	REQUIRE(n > 0);
	return n;
}

/*
 * fork() for a test: stdio flushed first (no output twice), and the child
 * gets a watchdog of `seconds`.  The watchdog is SIGALRM's default action,
 * carried out by the kernel: a handler would never run in a child stuck in
 * a sanitizer runtime (TSan defers signals there).  Wait for the child
 * with tu_wait_child().
 */
static inline pid_t tu_fork(unsigned seconds)
{
	if (!tu_exit_guarded) {
		fprintf(stderr, "tu_fork: tu_exit_guard() was not called in the fixture setup\n");
		abort();
	}
	bool threads = tu_threads() > 1;
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		tu_child_of_threads = threads;
		signal(SIGALRM, SIG_DFL);
		alarm(seconds);
	}
	return pid;
}

/* tu_fork() for a child that starts threads of its own: only once this
 * process has no other thread (one that pthread_join returned for may
 * still be ending in the kernel for a moment: polled).  Not for TSan
 * builds, whose runtime may run a thread of its own. */
static inline pid_t tu_fork_alone(unsigned seconds)
{
	if (!TU_POLL(tu_threads() == 1, 10000)) {
		fprintf(stderr, "tu_fork_alone: %u threads run here; the child could not start its own\n",
			tu_threads());
		abort();
	}
	return tu_fork(seconds);
}

/*
 * The exit status of child `pid`, or 128 + the signal that ended it (said
 * on stderr; SIGALRM is its tu_fork watchdog).  A child still running after
 * `seconds` (its watchdog's bound and a margin) is killed and reaped, so
 * that no hung child outlives the test and holds ctest's output pipe open.
 */
static inline int tu_wait_child(pid_t pid, unsigned seconds)
{
	int status = 0;
	uint64_t until = tu_now_ms() + (uint64_t)seconds * 1000;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		REQUIRE(r >= 0 || errno == EINTR);
		if (r == pid)
			break;
		if (tu_now_ms() > until) {
			fprintf(stderr, "child %d still running after %u s: killed\n", (int)pid, seconds);
			kill(pid, SIGKILL);
			REQUIRE(waitpid(pid, &status, 0) == pid);
			break;
		}
		usleep(10000);
	}
	if (!WIFSIGNALED(status))
		return WEXITSTATUS(status);
	fprintf(stderr, "child %d ended by signal %d (%s)%s\n", (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)),
		WTERMSIG(status) == SIGALRM ? ": it hung, its watchdog fired" : "");
	return 128 + WTERMSIG(status);
}

/* Exactly expect[0, size) on the device: after fsync or close. */
static inline bool tu_verify_disk(const char *path, const uint8_t *expect, size_t size)
{
	return tu_verify_disk_data(path, expect, size, 0);
}

/* expect[0, size) with the size possibly rounded up to a block (zeros):
 * after a PC_DSYNC write or the flusher's writeback, before fsync/close. */
static inline bool tu_verify_disk_rounded(const char *path, const uint8_t *expect, size_t size, size_t bs)
{
	return tu_verify_disk_data(path, expect, size, bs);
}

#endif
