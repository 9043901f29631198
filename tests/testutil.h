/*
 * testutil.h - tiny helpers shared by the test programs.
 *
 * Every test program is one executable run by CTest.  CHECK() records a
 * failure with its location and goes on; test_done() prints the closing
 * line "N passed, N failed" and returns the exit status.
 */
#ifndef PC_TESTUTIL_H
#define PC_TESTUTIL_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned tu_passed, tu_failed;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (cond) {                                                           \
			tu_passed++;                                                  \
		} else {                                                              \
			tu_failed++;                                                  \
			fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d %s)\n",   \
				__FILE__, __LINE__, #cond, errno, strerror(errno));   \
		}                                                                     \
	} while (0)

/* Fatal: the test cannot go on. */
#define REQUIRE(cond)                                                                 \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s (errno %d %s)\n", \
				__FILE__, __LINE__, #cond, errno, strerror(errno));   \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

static inline int test_done(void)
{
	printf("%u passed, %u failed\n", tu_passed, tu_failed);
	return tu_failed ? 1 : 0;
}

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
	snprintf(out, n, "%s/%s", dir, file);
}

/* Remove a test directory and the plain files in it. */
static inline void test_rmdir(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* xorshift64*: reproducible random numbers from a printed seed. */
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

#endif
