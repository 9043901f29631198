/*
 * main.c - pcfs: mount a directory through pagecache.
 *
 *   pcfs [options] BACKING_DIR MOUNTPOINT
 *
 * Order of things: options and paths are checked, and a cache of the
 * asked size is tried, before anything is mounted (a bad one is one line
 * and exit status 1).  Then the mount; then, without -f, the daemon forks
 * (the cache is created in the daemon: a cache belongs to the process
 * that made it) and the parent exits 0 once the daemon reports it is
 * ready, 1 if it could not get there.  At unmount (fusermount3 -u, umount,
 * SIGTERM, SIGINT) the cache writes everything back; data it could not
 * write is reported (stderr, syslog) and makes the exit status 1.
 */
#include "pcfs.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "options.h"


static void config_from_options(const struct pcfs_options *o, struct pc_config *cfg)
{
	pc_config_init(cfg);
	if (o->memory)
		cfg->memory_limit = o->memory;
	if (o->max_folio)
		cfg->max_folio_size = o->max_folio;
	if (o->block)
		cfg->block_size = o->block;
	if (o->dirty_limit)
		cfg->dirty_limit_bytes = o->dirty_limit;
	if (o->close_to_open)
		cfg->flags |= PC_CFG_CLOSE_TO_OPEN;
	/* Backing directories on tmpfs and the like refuse O_DIRECT. */
	cfg->flags |= PC_CFG_ALLOW_BUFFERED_BACKEND;
}

/* A cache of this configuration can be made (checked before mounting;
 * lazily, so that the check costs no memory). */
static void check_cache_config(const struct pcfs_options *o)
{
	struct pc_config cfg;
	config_from_options(o, &cfg);
	cfg.flags |= PC_CFG_LAZY_MEMORY;
	struct pc_cache *c = pc_cache_new(&cfg);
	char size[32];
	if (!c && errno == ENOMEM)
		die("-o memory=%s is more than this machine can back now (MemAvailable, cgroup limits): %s",
		    size_text(cfg.memory_limit, size), strerror(errno));
	if (!c) /* options.c checked the ranges: pagecache changed its own? */
		die("pagecache refuses these sizes (memory, max_folio, block, dirty_limit): %s", strerror(errno));
	pc_cache_destroy(c);
}

/* MAP_SHARED of a file opened with FOPEN_DIRECT_IO: the kernel (6.6 and
 * later) allows it only if the daemon grants FUSE_DIRECT_IO_ALLOW_MMAP,
 * and libfuse can send that only from 3.17.1, whose headers define
 * FUSE_CAP_DIRECT_IO_ALLOW_MMAP.  The kernel then keeps the mapped pages
 * coherent with our direct writes itself (it writes back and invalidates
 * the range around each direct I/O), and a shared mapping's dirty pages
 * come back as WRITEs.  Built against an older libfuse (Debian 12's
 * 3.14), MAP_SHARED fails with ENODEV: see "mmap" in pcfs/README.md. */
static bool want_shared_mmap(struct fuse_conn_info *conn)
{
#ifdef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
	if (conn->capable & FUSE_CAP_DIRECT_IO_ALLOW_MMAP) {
		conn->want |= FUSE_CAP_DIRECT_IO_ALLOW_MMAP;
		return true;
	}
#else
	(void)conn;
#endif
	return false;
}

static void daemon_ready(int fd);

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct pcfs *fs = userdata;
	/* The kernel has spoken to the daemon: the mount is up.  Told only
	 * now, so that a mount whose INIT fails makes pcfs exit 1, not 0. */
	daemon_ready(fs->ready_fd);
	fs->ready_fd = -1;
	fs->shared_mmap = want_shared_mmap(conn);
	/* 1 MiB requests: libfuse asks the kernel for max_pages to match. */
	conn->max_write = 1u << 20;
	conn->max_readahead = 0; /* direct I/O: the kernel reads nothing ahead */
	if (conn->max_background < 64)
		conn->max_background = 64;
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_HANDLE_KILLPRIV | FUSE_CAP_EXPORT_SUPPORT);
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* The kernel checks ACLs itself (with default_permissions; it reads
	 * them through getxattr), and sends modes without the umask, with
	 * the umask beside them: a create as the caller applies it, or the
	 * parent directory's default ACL instead, as the backing file
	 * system decides (creds.c). */
	if (conn->capable & FUSE_CAP_POSIX_ACL)
		conn->want |= FUSE_CAP_POSIX_ACL;
	else
		pcfs_log(LOG_WARNING, "the kernel does not offer FUSE_POSIX_ACL: ACLs are checked at open only");
	if (conn->capable & FUSE_CAP_DONT_MASK)
		conn->want |= FUSE_CAP_DONT_MASK;
}

/* The mount's source, as mount(8) and /proc/self/mounts show it:
 * BACKING_DIR's absolute path (as sshfs and bindfs show theirs; a bare
 * "pcfs" is shown relative to the reader's directory), with the commas
 * and backslashes that -o would split on escaped.  -o fsname= replaces it. */
static const char *fsname_of(const char *backing, char *out, size_t size)
{
	char abs[PATH_MAX];
	const char *src = realpath(backing, abs) ? abs : backing;
	size_t n = 0;
	for (; *src && n + 3 < size; src++) {
		if (*src == ',' || *src == '\\')
			out[n++] = '\\';
		out[n++] = *src;
	}
	out[n] = 0;
	return out;
}

static struct fuse_session *session_new(struct pcfs *fs, const char *fuse_opts)
{
	static struct fuse_lowlevel_ops ops;
	ops.init = op_init;
	ops_meta_fill(&ops);
	ops_data_fill(&ops);
	char opts[8192 + 2 * PATH_MAX], name[2 * PATH_MAX];
	snprintf(opts, sizeof(opts), "default_permissions,fsname=%s,subtype=pcfs%s%s%s%s",
		 fsname_of(fs->opt.backing, name, sizeof(name)), fs->opt.allow_other ? ",allow_other" : "",
		 fs->opt.ro ? ",ro" : "", *fuse_opts ? "," : "", fuse_opts);
	char *argv[] = { "pcfs", "-o", opts, fs->opt.debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(fs->opt.debug ? 4 : 3, argv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), fs);
	fuse_opt_free_args(&args);
	return se;
}

/* Without -f: fork; the parent waits for the daemon's word and exits with
 * it.  Returns the write end of the pipe in the daemon (-1 with -f). */
static int daemonise(void)
{
	int p[2];
	if (pipe(p) != 0)
		die("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0) {
		close(p[1]);
		char ok = 0;
		ssize_t n = read(p[0], &ok, 1);
		_exit(n == 1 && ok == 'y' ? 0 : 1);
	}
	close(p[0]);
	setsid();
	return p[1];
}

static void daemon_ready(int fd)
{
	if (fd < 0)
		return;
	int null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	/* Nothing is reached by a relative path from here on (BACKING_DIR is
	 * a descriptor, stats_file absolute): do not keep the directory pcfs
	 * was started in busy, as daemons do not. */
	if (chdir("/") != 0) {
		/* "/" is always there; nothing depends on it */
	}
	if (write(fd, "y", 1) != 1) {
		/* The parent is gone: nothing to tell. */
	}
	close(fd);
}

/* ------------------------------------------------- the housekeeping thread */

static atomic_bool housekeeping_stop;

/* SIGUSR1 prints the stats; once a second, write times owed to backing
 * files whose data is written now are put on them (times.c). */
static void *housekeeping(void *arg)
{
	struct pcfs *fs = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	while (!atomic_load(&housekeeping_stop)) {
		struct timespec t = { 1, 0 };
		if (sigtimedwait(&set, NULL, &t) == SIGUSR1)
			stats_report(fs);
		inode_settle_times(fs, false);
	}
	return NULL;
}

static int root_init(struct pcfs *fs, int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -errno;
	fs->root.fd = fd;
	fs->root.dev = st.st_dev;
	fs->root.ino = st.st_ino;
	fs->root.is_root = true;
	fs->root.nlookup = 1;
	pthread_mutex_init(&fs->root.lock, NULL);
	return 0;
}

static int serve(struct pcfs *fs)
{
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc)
		return -1;
	fuse_loop_cfg_set_max_threads(lc, fs->opt.threads);
	fuse_loop_cfg_set_idle_threads(lc, fs->opt.threads);
	int r = fuse_session_loop_mt(fs->se, lc);
	fuse_loop_cfg_destroy(lc);
	return r;
}

/* Inodes hold O_PATH descriptors (a bounded number of them, a share of
 * this limit, where they can be reopened by file handle: fds.c; all of
 * them elsewhere) and pagecache keeps closed files' descriptors, so take
 * the hard limit, as libfuse's passthrough_ll does. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* What made the exit status 1: logged, and the first kept in error[256]
 * for -o stats_file. */
static void exit_error(char *error, const char *what, int err)
{
	pcfs_log(LOG_ERR, "%s: %s", what, strerror(err));
	if (!*error)
		snprintf(error, 256, "%s: %s", what, strerror(err));
}

/* After the mount is gone (loop: what the FUSE loop returned, < 0 an
 * error): write everything back, then put the mtimes still owed on the
 * backing files (the write-back just changed them), and say what could
 * not be done.  The exit status: 1 if anything failed.  libfuse's signal
 * handlers stay until the data is written: a second SIGTERM or SIGINT
 * (an impatient ^C) must not end the process with data still cached. */
static int finish(struct pcfs *fs, int loop)
{
	/* The last counters for -o stats_file, while there is a cache. */
	size_t len = 0;
	char *counters = fs->opt.stats_file ? stats_text(fs, &len) : NULL;
	char error[256] = "";
	if (loop < 0)
		exit_error(error, "the FUSE session ended with an error", -loop);
	fds_close_unused(fs); /* room for the write-back's own (syncfs) */
	if (pc_cache_destroy(fs->cache) != 0)
		exit_error(error, "data could not be written back at unmount", errno);
	fs->cache = NULL;
	inode_settle_times(fs, true);
	stats_final(fs, counters, len, error);
	int status = *error ? 1 : 0;
	fuse_remove_signal_handlers(fs->se);
	fuse_session_destroy(fs->se);
	inode_table_free(fs);
	return status;
}

int main(int argc, char **argv)
{
	struct cmdline cl;
	parse_cmdline(&cl, argc, argv);
	/* Before any thread: each inherits the capabilities of its maker. */
	creds_drop_resource();
	creds_init();
	raise_fd_limit();
	static struct pcfs fs;
	fs.opt = cl.opt;
	pcfs_log_to_stderr(fs.opt.foreground);
	fs.owner = getuid();
	int backing_fd = check_paths(&fs.opt);
	check_cache_config(&fs.opt);
	if (root_init(&fs, backing_fd) != 0 || inode_table_init(&fs) != 0)
		die("out of memory");
	fds_init(&fs);
	/* What must work when descriptors have run out (fds.c logs it) is
	 * opened now: the syslog socket, and libgcc_s, which glibc loads at
	 * the first pthread_cancel (libfuse's loop ends so) and aborts the
	 * process without, data still cached, when it cannot. */
	openlog("pcfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE);

	fs.se = session_new(&fs, cl.fuse_opts);
	if (!fs.se)
		die("bad FUSE options: %s", cl.fuse_opts);
	if (fuse_set_signal_handlers(fs.se) != 0)
		die("cannot set signal handlers");
	if (fuse_session_mount(fs.se, fs.opt.mountpoint) != 0)
		die("cannot mount at %s", fs.opt.mountpoint);

	fs.ready_fd = fs.opt.foreground ? -1 : daemonise();
	/* The daemon's own umask must take no bits away: a create applies
	 * the program's (creds.c: per worker thread; or the kernel did,
	 * where it does not offer FUSE_DONT_MASK). */
	umask(0);
	/* The daemon's own /proc/self/fd, and its own cache. */
	fs.proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct pc_config cfg;
	config_from_options(&fs.opt, &cfg);
	fs.cache = fs.proc_fd >= 0 ? pc_cache_new(&cfg) : NULL;
	if (!fs.cache) {
		fprintf(stderr, "pcfs: cannot start: %s\n", strerror(errno));
		fuse_session_unmount(fs.se);
		return 1;
	}
	/* SIGUSR1 is the housekeeping thread's (sigtimedwait): blocked in
	 * every thread, before the FUSE workers start. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_t hk;
	bool have_hk = pthread_create(&hk, NULL, housekeeping, &fs) == 0;

	int loop = serve(&fs);
	atomic_store(&housekeeping_stop, true);
	if (have_hk)
		pthread_join(hk, NULL);
	fuse_session_unmount(fs.se);
	return finish(&fs, loop);
}
