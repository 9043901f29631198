/*
 * pckeeper - hold a shared cache so that it outlives the processes using it.
 *
 *   pckeeper NAME [--memory SIZE]
 *   pckeeper --help
 *
 * A shared cache (struct pc_config's shared_name) lives while some process
 * is attached to it; the last one out writes everything back and the cache
 * is gone.  Data a process wrote without fsync and left behind is then
 * served from memory to the next process only if something kept the cache
 * alive in between.  pckeeper is that something: it attaches to the cache
 * NAME (creating it, with SIZE bytes of memory, if none exists), says so on
 * one line of standard output, and waits for SIGTERM, SIGINT or SIGHUP.
 * Then it detaches like any process: if it is the last, its
 * pc_cache_destroy writes everything back.
 *
 * The line, once the cache is ready, is what a script or a test waits for:
 *
 *   pckeeper: holding shared cache NAME (N MiB)
 *
 * Exit status: 0 after a signal and a clean detach; 1 when the cache cannot
 * be created or attached to, or its write-back failed; 2 for bad usage.
 * See man/pckeeper.1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagecache.h"

#define MIB ((size_t)1 << 20)
/* struct pc_config's rule for shared_name (pagecache.h). */
#define NAME_MAX_BYTES 200

/* The synopsis; with `full` (--help) what the program and options do. */
static void usage(FILE *out, bool full)
{
	fprintf(out, "usage: pckeeper NAME [--memory SIZE]\n"
		     "       pckeeper --help\n");
	if (!full)
		return;
	fprintf(out, "Holds the shared pagecache cache NAME (creating it if none exists) until\n"
		     "SIGTERM, SIGINT or SIGHUP, then detaches; the last process out writes\n"
		     "everything back.\n"
		     "  -m, --memory SIZE  the cache's memory if pckeeper creates it: bytes, or\n"
		     "                     a number followed by K, M or G (powers of 1024)\n"
		     "  -h, --help         this text\n");
}

/*
 * SIZE: decimal digits and an optional K, M or G (either case).  strtoull
 * alone would take leading blanks, a sign (and wrap "-1" round to a huge
 * size) and hex, so the first character must be a digit.  0 for garbage,
 * zero or a size that does not fit a size_t: the caller refuses all three.
 */
static size_t parse_size(const char *s)
{
	if (*s < '0' || *s > '9')
		return 0;
	errno = 0;
	char *end;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno == ERANGE || n > SIZE_MAX)
		return 0;
	unsigned shift = 0;
	switch (*end) {
	case '\0':
		break;
	case 'K': case 'k':
		shift = 10;
		break;
	case 'M': case 'm':
		shift = 20;
		break;
	case 'G': case 'g':
		shift = 30;
		break;
	default:
		return 0;
	}
	if (shift && end[1] != '\0')
		return 0;
	if (n > (SIZE_MAX >> shift))
		return 0;
	return (size_t)n << shift;
}

/* The options and NAME into *cfg.  Returns 0 to go on, -1 after --help
 * (exit 0), or 2 for bad usage (said on stderr). */
static int parse_args(int argc, char **argv, struct pc_config *cfg)
{
	static const struct option lo[] = {
		{ "memory", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "m:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'm':
			cfg->memory_limit = parse_size(optarg);
			if (!cfg->memory_limit) {
				fprintf(stderr, "pckeeper: --memory %s: not a size (bytes, or a number followed by "
						"K, M or G; above 0, and within 16 EiB)\n", optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout, true);
			return -1;
		default: /* getopt said what was wrong, on one line */
			usage(stderr, false);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "pckeeper: %s\n", optind == argc ? "no NAME given" : "more than one NAME given");
		usage(stderr, false);
		return 2;
	}
	cfg->shared_name = argv[optind];
	return 0;
}

/* pagecache.h's rule for a name, only to explain an EINVAL: the library
 * decides. */
static bool name_follows_rules(const char *name)
{
	size_t len = strlen(name);
	return len >= 1 && len <= NAME_MAX_BYTES && !strchr(name, '/') && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0;
}

/* Why pc_cache_new failed, in the user's terms: the likely cause for the
 * errors whose strerror says little here. */
static void explain_failure(int err, const struct pc_config *cfg, bool memory_given)
{
	const char *name = cfg->shared_name;

	fprintf(stderr, "pckeeper: %s: %s\n", name, strerror(err));
	switch (err) {
	case EINVAL:
		if (!name_follows_rules(name))
			fprintf(stderr, "pckeeper: a cache's name is 1 to %d bytes, without '/', "
					"and not \".\" or \"..\"\n", NAME_MAX_BYTES);
		else if (memory_given)
			fprintf(stderr, "pckeeper: either the cache %s exists with another memory size (its "
					"creator's settings rule: leave out --memory to hold it as it is), or "
					"--memory is out of range (at least 4M; see pc_cache_new(3))\n", name);
		else
			fprintf(stderr, "pckeeper: a setting is out of range (see pc_cache_new(3))\n");
		break;
	case EACCES:
		fprintf(stderr, "pckeeper: the cache %s belongs to another user, or its mode was changed: "
				"a user attaches only to caches of their own\n", name);
		break;
	case ENOMEM:
		fprintf(stderr, "pckeeper: the machine cannot back the cache's memory now, or the address "
				"range of the cache is taken in this process\n");
		break;
	case EPROTO:
		fprintf(stderr, "pckeeper: another version of the library made the cache %s\n", name);
		break;
	case EMFILE:
		fprintf(stderr, "pckeeper: too many processes are attached to %s, or this process has "
				"too many open files\n", name);
		break;
	default:
		break;
	}
}

/*
 * The readiness line, flushed: whoever started us may wait for it.  Its
 * size is the cache's own (an attacher gets the creator's), not what
 * --memory asked for.  Returns 0, or -1 said on stderr.
 */
static int announce(struct pc_cache *cache, const char *name)
{
	struct pc_config actual;

	if (pc_cache_config(cache, &actual) != 0) {
		fprintf(stderr, "pckeeper: %s: pc_cache_config: %s\n", name, strerror(errno));
		return -1;
	}
	if (actual.memory_limit % MIB == 0)
		printf("pckeeper: holding shared cache %s (%zu MiB)\n", name, actual.memory_limit / MIB);
	else
		printf("pckeeper: holding shared cache %s (%zu KiB)\n", name, actual.memory_limit >> 10);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "pckeeper: %s: writing to standard output: %s\n", name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Until one of `set` arrives.  Every thread blocks them, so none is lost
 * to a cache thread and none interrupts a library call half-way. */
static void wait_for_signal(const sigset_t *set)
{
	int sig;

	while (sigwait(set, &sig) != 0)
		;
}

int main(int argc, char **argv)
{
	struct pc_config cfg;
	struct pc_cache *cache;
	sigset_t stop;
	int rc;

	pc_config_init(&cfg);
	size_t default_memory = cfg.memory_limit;
	rc = parse_args(argc, argv, &cfg);
	if (rc)
		return rc < 0 ? 0 : rc;
	/* As the library sees it: a field left at pc_config_init's default
	 * takes the cache's value, so only another size can conflict. */
	bool memory_given = cfg.memory_limit != default_memory;

	/*
	 * Blocked before pc_cache_new: the threads it starts inherit this
	 * mask, so the stopping signals can only be taken by sigwait below,
	 * never by a cache thread's default action (which would end the
	 * process without detaching, leaving the write-back to whoever
	 * attaches next).  A second signal during the write-back stays
	 * pending: it does not cut the write-back short.
	 */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	rc = pthread_sigmask(SIG_BLOCK, &stop, NULL);
	if (rc) {
		fprintf(stderr, "pckeeper: pthread_sigmask: %s\n", strerror(rc));
		return 1;
	}
	/* A reader of the readiness line that went away must not kill us
	 * undetached: the write fails with EPIPE instead, and we detach. */
	signal(SIGPIPE, SIG_IGN);

	cache = pc_cache_new(&cfg);
	if (!cache) {
		explain_failure(errno, &cfg, memory_given);
		return 1;
	}
	rc = 0;
	if (announce(cache, cfg.shared_name) == 0)
		wait_for_signal(&stop);
	else
		rc = 1;

	if (pc_cache_destroy(cache) != 0) {
		fprintf(stderr, "pckeeper: %s: pc_cache_destroy: %s (data not written back is lost)\n",
			cfg.shared_name, strerror(errno));
		rc = 1;
	}
	return rc;
}
