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
		"     memory=SIZE          cache memory (memory_limit), default 256M\n"
		"     max_folio=SIZE       largest folio, 4K..2M, default 256K\n"
		"     block=SIZE           block size, 512..64K (default: the file system's)\n"
		"     uncached=never|always|SIZE\n"
		"                          PC_DONTCACHE for no file (default), every request,\n"
		"                          or reads and writes of at least SIZE bytes\n"
		"     dirty_limit=SIZE     dirty bytes before writers wait (default 20%% of memory)\n"
		"     threads=N            FUSE worker threads, 1..256 (default 16)\n"
		"     close_to_open        every close(2) writes the file back and waits\n"
		"     ro                   read-only mount\n"
		"     allow_other          let other users in (needs user_allow_other in\n"
		"                          /etc/fuse.conf for non-root)\n"
		"     FUSE options passed on: allow_root, auto_unmount, fsname=, subtype=,\n"
		"     max_background=, nosuid, nodev, noexec, noatime, ...\n"
		"SIZE: bytes, or with K, M, G or T (powers of 1024).\n"
		"Stats: cat MOUNTPOINT/.pcfs-stats (mount owner only), or kill -USR1 the daemon.\n"
		"Unmount: fusermount3 -u MOUNTPOINT (or umount); SIGTERM/SIGINT also unmount.\n"
		"Everything is written back at unmount; a crash of the daemon loses what\n"
		"was not fsynced.\n");
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

static size_t size_value(const char *name, const char *v)
{
	size_t n;
	if (!v || !parse_size(v, &n))
		die("bad value for -o %s: '%s' (a size: bytes, or with K, M, G, T)", name, v ? v : "");
	return n;
}

/* FUSE and mount options pcfs passes on unchanged. */
static bool fuse_option_ok(const char *o)
{
	static const char *const plain[] = { "allow_root", "auto_unmount", "default_permissions", "rw", "dev",
					     "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime",
					     "relatime", "norelatime", "strictatime", "nostrictatime", "sync",
					     "async", "dirsync", "debug", NULL };
	static const char *const valued[] = { "fsname=", "subtype=", "max_read=", "max_background=",
					      "congestion_threshold=", NULL };
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
		opt->memory = size_value(o, v);
	else if (!strcmp(o, "max_folio"))
		opt->max_folio = size_value(o, v);
	else if (!strcmp(o, "block"))
		opt->block = size_value(o, v);
	else if (!strcmp(o, "dirty_limit"))
		opt->dirty_limit = size_value(o, v);
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
		long n = v ? strtol(v, &end, 10) : 0;
		if (!v || !*v || *end || n < 1 || n > 256)
			die("bad value for -o threads: '%s' (1 to 256)", v ? v : "");
		opt->threads = (unsigned)n;
	} else if (!strcmp(o, "ro") && !v)
		opt->ro = true;
	else if (!strcmp(o, "allow_other") && !v)
		opt->allow_other = true;
	else if (!strcmp(o, "close_to_open") && !v)
		opt->close_to_open = true;
	else {
		if (v)
			v[-1] = '=';
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

int check_paths(const struct pcfs_options *opt)
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
	size_t lb = strlen(real_b);
	if (!strcmp(real_b, "/") || (!strncmp(real_mp, real_b, lb) && (real_mp[lb] == '/' || !real_mp[lb])))
		die("MOUNTPOINT %s is inside BACKING_DIR %s: the mount would contain itself", opt->mountpoint,
		    opt->backing);
	return fd;
}
