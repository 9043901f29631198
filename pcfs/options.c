/*
 * options.c - pcfs's command line: its own -o options, the FUSE ones it
 * passes on, and the checks of BACKING_DIR and MOUNTPOINT, all done before
 * anything is mounted.  Every error is one line on stderr and exit status 1.
 */
#include "pcfs.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("pcfs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

void usage(FILE *out)
{
	fprintf(out,
		"usage: pcfs [options] BACKING_DIR MOUNTPOINT\n"
		"Mount BACKING_DIR at MOUNTPOINT; every regular file's data goes through one pagecache.\n"
		"\n"
		"  -f                      stay in the foreground (else daemonise once mounted)\n"
		"  -d                      FUSE debug output (implies -f)\n"
		"  -h, --help              this text\n"
		"  -o OPT[,OPT...]         options:\n"
		"     memory=SIZE          cache memory (memory_limit), default 256M; at least\n"
		"                          1M and 16 x max_folio, less than 16T, and no more\n"
		"                          than the machine can back\n"
		"     max_folio=SIZE       largest folio, a power of two 4K..2M, default 256K\n"
		"     block=SIZE           block size, a power of two 512..64K, at most\n"
		"                          max_folio (default: the file system's)\n"
		"     uncached=never|always|SIZE\n"
		"                          PC_DONTCACHE for no request (default), every request,\n"
		"                          or reads and writes of at least SIZE bytes\n"
		"     dirty_limit=SIZE     dirty bytes before writers wait, 4K to half of memory\n"
		"                          (default 20%% of memory)\n"
		"     threads=N            FUSE worker threads, 1..256 (default 16)\n"
		"     close_to_open        every close(2) writes the file back and waits\n"
		"     stats_file=PATH      kill -USR1 writes the counters there too (mode 0600),\n"
		"                          and the last ones with unmount_status at exit\n"
		"     user_fd_limit=N      open files and directories one user may hold through\n"
		"                          the mount; one more gets EMFILE (root and pcfs's own\n"
		"                          user: no limit).  0: no limit.  Default: a sixteenth\n"
		"                          of RLIMIT_NOFILE, at least 64 (user_fd_limit in the\n"
		"                          stats; user_fds.UID: what each user holds)\n"
		"     ro                   read-only mount\n"
		"     allow_other          let other users in (needs user_allow_other in\n"
		"                          /etc/fuse.conf for non-root)\n"
		"     FUSE options passed on: allow_root, auto_unmount, fsname=, subtype=,\n"
		"     nosuid, nodev, noexec, noatime, sync, dirsync, ...\n"
		"SIZE: bytes, or with K, M, G or T (powers of 1024).  A size out of its range\n"
		"is refused before mounting, in one line naming the option and the limit.\n"
		"Stats: cat MOUNTPOINT/.pcfs-stats (mount owner only), or kill -USR1 the daemon\n"
		"(to syslog, stderr with -f, and -o stats_file).\n"
		"Unmount: fusermount3 -u MOUNTPOINT (or umount); SIGTERM/SIGINT also unmount.\n"
		"Everything is written back at unmount; a crash of the daemon loses what\n"
		"was not written back yet (the flusher writes dirty data within seconds;\n"
		"fsync, and a rename over a file, write it at once).\n");
}

/* "256M" and the like; false for anything else. */
static bool parse_size(const char *s, size_t *out)
{
	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return false;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	case 0: break;
	default: return false;
	}
	if (*end && end[1] && !(toupper((unsigned char)end[1]) == 'I' && toupper((unsigned char)end[2]) == 'B' &&
				!end[3]) && !(toupper((unsigned char)end[1]) == 'B' && !end[2]))
		return false;
	if (shift && v > (ULLONG_MAX >> shift))
		return false;
	*out = (size_t)(v << shift);
	return true;
}

/* ---------------------------------------------------------- size limits */

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define TIB ((size_t)1 << 40)

const char *size_text(size_t n, char buf[32])
{
	static const char units[] = "TGMK";
	for (int i = 0; i < 4; i++) {
		size_t u = (size_t)1 << (10 * (4 - i));
		if (n && n % u == 0) {
			snprintf(buf, 32, "%zu%c", n / u, units[i]);
			return buf;
		}
	}
	snprintf(buf, 32, "%zu", n);
	return buf;
}

/* -o name=v within [lo, hi], else one line naming the limit (and what it
 * comes from: lo_why, hi_why; "" for nothing) and exit 1. */
static void check_range(const char *name, size_t v, size_t lo, const char *lo_why, size_t hi, const char *hi_why)
{
	char a[32], b[32];
	if (v < lo)
		die("-o %s=%s is too small: at least %s%s", name, size_text(v, a), size_text(lo, b), lo_why);
	if (v > hi)
		die("-o %s=%s is too large: at most %s%s", name, size_text(v, a), size_text(hi, b), hi_why);
}

static void check_pow2(const char *name, size_t v, size_t lo, size_t hi)
{
	char a[32], b[32], c[32];
	if (v & (v - 1))
		die("-o %s=%s is not a power of two (%s to %s)", name, size_text(v, a), size_text(lo, b),
		    size_text(hi, c));
	check_range(name, v, lo, "", hi, "");
}

/* The limits pagecache puts on its configuration (struct pc_config in
 * pagecache.h), checked here so that a bad size is one line that names
 * the option and its limit, not pc_cache_new's EINVAL. */
static void check_sizes(const struct pcfs_options *o)
{
	char a[32], why[96];
	size_t folio = (o->given & GIVEN_MAX_FOLIO) ? o->max_folio : 256 * KIB;
	if (o->given & GIVEN_MAX_FOLIO)
		check_pow2("max_folio", o->max_folio, 4 * KIB, 2 * MIB);
	if (o->given & GIVEN_BLOCK) {
		check_pow2("block", o->block, 512, 64 * KIB);
		snprintf(why, sizeof(why), " (max_folio, %s)", size_text(folio, a));
		check_range("block", o->block, 512, "", folio, why);
	}
	size_t memory = (o->given & GIVEN_MEMORY) ? o->memory : 256 * MIB;
	if (o->given & GIVEN_MEMORY) {
		size_t lo = 16 * folio > MIB ? 16 * folio : MIB;
		snprintf(why, sizeof(why), lo > MIB ? " (16 times max_folio, %s)" : "", size_text(folio, a));
		check_range("memory", o->memory, lo, why, SIZE_MAX, "");
		/* Counted in 4 KiB pages, below UINT32_MAX of them. */
		if (o->memory >= 16 * TIB - 4 * KIB)
			die("-o memory=%s is too large: less than 16T", size_text(o->memory, a));
	}
	if (o->given & GIVEN_DIRTY_LIMIT) {
		snprintf(why, sizeof(why), " (half of memory, %s)", size_text(memory, a));
		check_range("dirty_limit", o->dirty_limit, 4 * KIB, "", memory / 2, why);
	}
}

/* A size option's value (its range is check_sizes's), given: one of
 * GIVEN_* for o->given. */
static size_t size_value(struct pcfs_options *o, unsigned given, const char *name, const char *v)
{
	size_t n;
	if (!v || !parse_size(v, &n))
		die("bad value for -o %s: '%s' (a size: bytes, or with K, M, G, T)", name, v ? v : "");
	o->given |= given;
	return n;
}

/* FUSE options pcfs does not pass on, and why (die()s with it): max_read=
 * (the kernel's and libfuse's figures then disagree and INIT fails),
 * max_background= and congestion_threshold= (fuse_session_new refuses). */
static void refuse_fuse_option(const char *o)
{
	static const struct {
		const char *name, *why;
	} refused[] = {
		{ "max_read=", "pcfs sets the request size itself (1 MiB)" },
		{ "max_background=", "not taken by libfuse's low-level session" },
		{ "congestion_threshold=", "not taken by libfuse's low-level session" },
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (!strncmp(o, refused[i].name, strlen(refused[i].name)))
			die("-o %s: %s", o, refused[i].why);
}

/* FUSE and mount options pcfs passes on unchanged. */
static bool fuse_option_ok(const char *o)
{
	static const char *const plain[] = { "allow_root", "auto_unmount", "default_permissions", "rw", "dev",
					     "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime",
					     "relatime", "norelatime", "strictatime", "nostrictatime", "sync",
					     "async", "dirsync", "debug", NULL };
	static const char *const valued[] = { "fsname=", "subtype=", NULL };
	for (int i = 0; plain[i]; i++)
		if (!strcmp(o, plain[i]))
			return true;
	for (int i = 0; valued[i]; i++)
		if (!strncmp(o, valued[i], strlen(valued[i])) && o[strlen(valued[i])])
			return true;
	return false;
}

static void add_passthrough(struct cmdline *cl, const char *o)
{
	size_t need = strlen(cl->fuse_opts) + strlen(o) + 2;
	if (need > sizeof(cl->fuse_opts))
		die("too many options");
	if (*cl->fuse_opts)
		strcat(cl->fuse_opts, ",");
	strcat(cl->fuse_opts, o);
}

static void parse_one_option(struct cmdline *cl, char *o)
{
	struct pcfs_options *opt = &cl->opt;
	char *v = strchr(o, '=');
	if (v)
		*v++ = 0;
	if (!strcmp(o, "memory"))
		opt->memory = size_value(opt, GIVEN_MEMORY, o, v);
	else if (!strcmp(o, "max_folio"))
		opt->max_folio = size_value(opt, GIVEN_MAX_FOLIO, o, v);
	else if (!strcmp(o, "block"))
		opt->block = size_value(opt, GIVEN_BLOCK, o, v);
	else if (!strcmp(o, "dirty_limit"))
		opt->dirty_limit = size_value(opt, GIVEN_DIRTY_LIMIT, o, v);
	else if (!strcmp(o, "uncached")) {
		if (v && !strcmp(v, "never"))
			opt->uncached = UNCACHED_NEVER;
		else if (v && !strcmp(v, "always"))
			opt->uncached = UNCACHED_ALWAYS;
		else if (v && parse_size(v, &opt->uncached_min) && opt->uncached_min > 0)
			opt->uncached = UNCACHED_SIZE;
		else
			die("bad value for -o uncached: '%s' (never, always or a size)", v ? v : "");
	} else if (!strcmp(o, "threads")) {
		char *end;
		errno = 0;
		long n = v ? strtol(v, &end, 10) : 0;
		if (!v || !*v || *end || errno)
			die("bad value for -o threads: '%s' (a number, 1 to 256)", v ? v : "");
		if (n < 1 || n > 256)
			die("-o threads=%ld is too %s: %s", n, n < 1 ? "small" : "large",
			    n < 1 ? "at least 1" : "at most 256");
		opt->threads = (unsigned)n;
	} else if (!strcmp(o, "user_fd_limit")) {
		char *end;
		errno = 0;
		unsigned long long n = v && isdigit((unsigned char)*v) ? strtoull(v, &end, 10) : 0;
		if (!v || !isdigit((unsigned char)*v) || *end || errno || n > (1ull << 30))
			die("bad value for -o user_fd_limit: '%s' (a number, 0 for no limit, at most 1073741824)",
			    v ? v : "");
		opt->user_fd_limit = (size_t)n;
		opt->user_fd_limit_given = true;
	} else if (!strcmp(o, "ro") && !v)
		opt->ro = true;
	else if (!strcmp(o, "allow_other") && !v)
		opt->allow_other = true;
	else if (!strcmp(o, "close_to_open") && !v)
		opt->close_to_open = true;
	else if (!strcmp(o, "stats_file")) {
		if (!v || !*v)
			die("-o stats_file needs a file name");
		free(opt->stats_file);
		if (!(opt->stats_file = strdup(v)))
			die("out of memory");
	}
	else {
		if (v)
			v[-1] = '=';
		refuse_fuse_option(o);
		if (!fuse_option_ok(o))
			die("unknown option -o %s (see pcfs --help)", o);
		add_passthrough(cl, o);
	}
}

static void parse_option_list(struct cmdline *cl, const char *list)
{
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		die("out of memory");
	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save))
		parse_one_option(cl, o);
	free(copy);
}

void parse_cmdline(struct cmdline *cl, int argc, char **argv)
{
	memset(cl, 0, sizeof(*cl));
	cl->opt.threads = 16;
	const char *pos[3];
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "-f")) {
			cl->opt.foreground = true;
		} else if (!strcmp(a, "-d")) {
			cl->opt.foreground = cl->opt.debug = true;
		} else if (!strcmp(a, "-o")) {
			if (++i >= argc)
				die("-o needs an option list");
			parse_option_list(cl, argv[i]);
		} else if (!strncmp(a, "-o", 2)) {
			parse_option_list(cl, a + 2);
		} else if (a[0] == '-' && a[1]) {
			die("unknown option %s (see pcfs --help)", a);
		} else if (npos < 3) {
			pos[npos++] = a;
		}
	}
	if (npos != 2)
		die(npos < 2 ? "need BACKING_DIR and MOUNTPOINT (see pcfs --help)"
			     : "too many arguments: only BACKING_DIR and MOUNTPOINT (see pcfs --help)");
	cl->opt.backing = pos[0];
	cl->opt.mountpoint = pos[1];
	check_sizes(&cl->opt);
}

/* Is something mounted at the directory `real` (a resolved path)? */
static bool mounted_at(const char *real)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return false;
	char line[8192];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* id parent major:minor root mountpoint ... (octal escapes) */
		char mp[4096];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		char dec[4096];
		size_t j = 0;
		for (size_t i = 0; mp[i] && j + 1 < sizeof(dec); i++) {
			if (mp[i] == '\\' && isdigit((unsigned char)mp[i + 1]) && mp[i + 2] && mp[i + 3]) {
				dec[j++] = (char)strtol((char[]){ mp[i + 1], mp[i + 2], mp[i + 3], 0 }, NULL, 8);
				i += 3;
			} else {
				dec[j++] = mp[i];
			}
		}
		dec[j] = 0;
		found = !strcmp(dec, real);
	}
	fclose(f);
	return found;
}

/* Is the resolved path p dir or below it? */
static bool path_within(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	return !strcmp(dir, "/") || (!strncmp(p, dir, n) && (p[n] == '/' || !p[n]));
}

/* -o stats_file=PATH: its directory opened (the daemon writes it long
 * after, whatever its cwd, and never by path), and written once now, empty,
 * so that a directory that takes no new file is refused before mounting.
 * Not under MOUNTPOINT (real_mp): pcfs would write it through itself. */
static void check_stats_file(struct pcfs_options *opt, const char *real_mp)
{
	const char *path = opt->stats_file, *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	char dir[PATH_MAX], real_dir[PATH_MAX];
	if (!slash)
		strcpy(dir, ".");
	else if (slash == path)
		strcpy(dir, "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		die("-o stats_file=%s: not a file name", path);
	/* The directory is resolved this once (as the user named it), and
	 * every write goes through this descriptor (stats.c). */
	int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", dirfd);
	if (dirfd < 0 || !realpath(self, real_dir))
		die("-o stats_file=%s: %s: %s", path, dir, strerror(errno));
	char *abs = malloc(strlen(real_dir) + strlen(base) + 2), *name = strdup(base);
	if (!abs || !name)
		die("out of memory");
	sprintf(abs, "%s/%s", strcmp(real_dir, "/") ? real_dir : "", base);
	if (path_within(abs, real_mp))
		die("-o stats_file=%s is inside MOUNTPOINT %s: put it elsewhere", path, opt->mountpoint);
	if (stats_file_write(dirfd, name, "", 0) != 0)
		die("-o stats_file=%s: cannot write it: %s", path, strerror(errno));
	free(opt->stats_file);
	opt->stats_file = abs; /* for messages */
	opt->stats_dirfd = dirfd;
	opt->stats_name = name;
}

int check_paths(struct pcfs_options *opt)
{
	int fd = open(opt->backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die("BACKING_DIR %s: %s", opt->backing, errno == ENOTDIR ? "not a directory" : strerror(errno));
	struct stat st;
	if (stat(opt->mountpoint, &st) != 0) {
		if (errno == ENOTCONN)
			die("MOUNTPOINT %s is in use by a dead FUSE mount (%s): run fusermount3 -u %s", opt->mountpoint,
			    strerror(errno), opt->mountpoint);
		die("MOUNTPOINT %s: %s", opt->mountpoint, strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		die("MOUNTPOINT %s: not a directory", opt->mountpoint);
	char real_mp[PATH_MAX], real_b[PATH_MAX];
	if (!realpath(opt->mountpoint, real_mp) || !realpath(opt->backing, real_b))
		die("cannot resolve %s or %s: %s", opt->mountpoint, opt->backing, strerror(errno));
	if (mounted_at(real_mp))
		die("MOUNTPOINT %s is in use: something is mounted there", opt->mountpoint);
	if (path_within(real_mp, real_b))
		die("MOUNTPOINT %s is inside BACKING_DIR %s: the mount would contain itself", opt->mountpoint,
		    opt->backing);
	if (opt->stats_file)
		check_stats_file(opt, real_mp);
	return fd;
}
