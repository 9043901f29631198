/*
 * pcfs.h - what the parts of pcfs share: the mount's state, the inode
 * table, the open-file handles, and the operations each file provides.
 *
 * pcfs is a FUSE file system (libfuse3's low-level API) that mirrors a
 * backing directory.  Metadata passes through to the backing directory;
 * the data of every regular file goes through one pagecache instance.
 * See pcfs/README.md (and man/pcfs.8) for what a user sees.
 */
#ifndef PCFS_H
#define PCFS_H

#define _GNU_SOURCE
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "pagecache.h"

/* How -o uncached= maps to PC_DONTCACHE. */
enum uncached_mode { UNCACHED_NEVER, UNCACHED_ALWAYS, UNCACHED_SIZE };

/* Size options given on the command line (struct pcfs_options given). */
enum { GIVEN_MEMORY = 1, GIVEN_MAX_FOLIO = 2, GIVEN_BLOCK = 4, GIVEN_DIRTY_LIMIT = 8 };

struct pcfs_options {
	size_t memory, max_folio, block, dirty_limit;
	unsigned given; /* GIVEN_* */
	enum uncached_mode uncached;
	size_t uncached_min; /* UNCACHED_SIZE: requests of at least this */
	unsigned threads;
	bool ro, allow_other, close_to_open, foreground, debug;
	const char *backing, *mountpoint;
	char *stats_file; /* -o stats_file=, made absolute; NULL: none */
	/* -o stats_file's directory, opened once (O_PATH), and the file's
	 * name in it: every write goes through the descriptor (stats.c). */
	int stats_dirfd;
	char *stats_name;
	size_t user_fd_limit; /* -o user_fd_limit= (0: no cap) */
	bool user_fd_limit_given;
};

/*
 * One backing file or directory the kernel knows (it holds lookups on it).
 * The node id the kernel sees is the address of this structure.  Every
 * access to the backing file goes through an O_PATH descriptor of it (or
 * through /proc/self/fd/<fd>), never through a path: take it with
 * fd_hold and give it back with fd_put (fds.c), which keeps at most
 * fd_limit of them open and reopens the others by file handle.
 */
struct pcfs_inode {
	dev_t dev;
	ino_t ino;
	/* Under fs->fd_lock when `handle` is set (else fixed): the O_PATH
	 * descriptor, -1 while closed by the LRU; the threads using it now
	 * (and open pcfs handles: an open file keeps its descriptor); the
	 * LRU links, while fd is open and reopenable. */
	int fd;
	unsigned fd_users;
	struct pcfs_inode *lru_prev, *lru_next;
	struct file_handle *handle; /* reopens fd; NULL: fd stays open */
	int mount_fd;               /* decodes handle: its file system's (fds.c) */
	bool dev_counted;           /* counted in fs->devs (another file system) */
	bool is_root;
	uint64_t nlookup;          /* under the table lock */
	unsigned nopen;            /* open pcfs handles, under the table lock */
	struct pcfs_inode *hash_next;
	/*
	 * Times of data written through the mount (under `lock`).  The
	 * backing file's mtime and ctime change when pagecache writes the
	 * data back, seconds after the write: pcfs reports the time of the
	 * write instead, and puts that mtime on the backing file once the
	 * data is all written (times_pending).  ctime cannot be set: pcfs
	 * keeps showing its own for as long as the backing file's ctime is
	 * the one that followed pcfs's last change (shown_ctime_valid).
	 */
	pthread_mutex_t lock;
	/* The mode last read from the backing file (attr_of): a write looks
	 * for set-user-ID and set-group-ID bits here, without a call. */
	_Atomic unsigned mode;
	bool times_pending, shown_ctime_valid;
	struct timespec mtime, ctime, settled_backing_ctime;
	/* Truncated to zero, and not written back by a close since
	 * (inode_mark_emptied). */
	atomic_bool emptied;
};

/* An open regular file: one pagecache handle per FUSE open. */
struct pcfs_handle {
	struct pc_file *pf;
	struct pcfs_inode *in;
	int write_flags; /* PC_DSYNC for O_DSYNC / O_SYNC opens */
	uid_t uid;       /* who opened it: counted until RELEASE (user_fd_take) */
	/* The .pcfs-stats file: its text, made at open. */
	char *text;
	size_t text_len;
};

struct pcfs {
	struct pcfs_options opt;
	struct pc_cache *cache;
	struct fuse_session *se;
	int proc_fd; /* /proc/self/fd, to reopen O_PATH descriptors */
	uid_t owner;
	bool shared_mmap; /* FUSE_DIRECT_IO_ALLOW_MMAP granted (main.c) */
	int ready_fd;     /* tells the parent the mount is up (-f: -1) */
	struct pcfs_inode root;
	/* The inode table, by (dev, ino). */
	pthread_mutex_t table_lock;
	struct pcfs_inode **buckets;
	size_t nbuckets, ninodes;
	/* Inode descriptors (fds.c); lock order: table_lock, then fd_lock. */
	int mount_fd;               /* BACKING_DIR, for open_by_handle_at; -1: no handles */
	const char *no_handles_why; /* why not, for the log */
	pthread_mutex_t fd_lock;
	struct pcfs_inode lru;      /* list head: most recently used first */
	size_t lru_fds, fd_limit;   /* reopenable descriptors open, and their bound */
	size_t fds_pinned;          /* inodes without a handle: open for life */
	struct fds_dev *devs;       /* file systems inside BACKING_DIR */
	size_t ndevs, devs_cap;
	_Atomic uint64_t fd_reopens, fd_evictions;
	_Atomic int64_t fd_shortage_logged; /* CLOCK_MONOTONIC s of the last shortage line */
	/* Open files and directories per user, and the cap (fds.c). */
	struct fds_users *users;
	size_t user_fd_limit; /* 0: no cap */
	_Atomic uint64_t user_fd_refusals;
	/* Requests served (for the stats). */
	_Atomic uint64_t reads, writes, read_bytes, write_bytes, flush_errors;
};

/* The node id of the .pcfs-stats file in the mount's root. */
#define PCFS_STATS_INO ((fuse_ino_t)2)
#define PCFS_STATS_NAME ".pcfs-stats"
/* Its name: the daemon's entry, not a backing file's; never made,
 * removed, renamed, replaced or linked to through the mount. */
static inline bool pcfs_is_stats_name(fuse_ino_t parent, const char *name)
{
	return parent == FUSE_ROOT_ID && !strcmp(name, PCFS_STATS_NAME);
}

/* creds.c: requests done as their caller (a daemon running as root). */
void creds_init(void);
/* Drop CAP_SYS_RESOURCE from the process (before its threads exist). */
void creds_drop_resource(void);
enum { CREDS_UMASK = 1 }; /* creds_begin: the caller's umask too (creates) */
/* Take the caller's fsuid, fsgid and groups in this thread: 1 (creds_end
 * gives the daemon's back), 0 (nothing to do: root, a daemon that is not
 * root, or already the caller's), or -errno (the request must fail). */
int creds_begin(fuse_req_t req, unsigned what);
void creds_end(int begun);
/* Is gid the caller's group or one of its supplementary groups? */
bool creds_caller_in_group(fuse_req_t req, gid_t gid);

/* inode.c */
int inode_table_init(struct pcfs *fs);
struct pcfs_inode *inode_of(fuse_req_t req, fuse_ino_t ino);
/* The inode for the O_PATH descriptor fd with attributes st: an existing
 * one gets another lookup (and fd, if the LRU had closed its own; else fd
 * is closed), else a new one takes fd. */
struct pcfs_inode *inode_get(struct pcfs *fs, int fd, const struct stat *st);
/* The kernel forgot n lookups of in. */
void inode_forget(struct pcfs *fs, struct pcfs_inode *in, uint64_t n);
void inode_open_count(struct pcfs *fs, struct pcfs_inode *in, int delta);
/* ext4's auto_da_alloc for truncate and rewrite: a file truncated to
 * zero (O_TRUNC, truncate) is marked, and a close (FLUSH) takes the mark
 * (true once), writes the data back and waits, and marks it again if
 * the file is still empty. */
void inode_mark_emptied(struct pcfs_inode *in);
bool inode_take_emptied(struct pcfs_inode *in);
/* Put pending write times on backing files whose data is all written;
 * free inodes nobody needs any more.  `all`: the cache is gone, every
 * file is written. */
void inode_settle_times(struct pcfs *fs, bool all);
void inode_table_free(struct pcfs *fs);

/* fds.c: "/proc/self/fd"-relative name of a descriptor, for calls that
 * refuse O_PATH descriptors. */
void proc_name(int fd, char buf[32]);
/* fds.c: inodes' O_PATH descriptors.  At most fd_limit of those that can
 * be reopened by file handle are open at once (least recently used closed
 * first), so a tree of more files than RLIMIT_NOFILE can be used (file
 * systems mounted inside BACKING_DIR too); without file handles (not
 * root, or a file system that has none) an inode keeps its descriptor. */
void fds_init(struct pcfs *fs);
/* A new inode takes its descriptor fd (and a file handle of it). */
void fds_adopt(struct pcfs *fs, struct pcfs_inode *in, int fd);
/* A fresh descriptor of an inode that has one: kept if the LRU had
 * closed the inode's own, else closed. */
void fds_offer(struct pcfs *fs, struct pcfs_inode *in, int fd);
/* Does `in` keep its inode number (no handle: its descriptor is open for
 * life; else its descriptor is open now)?  While a descriptor is open the
 * file lives and no other file can take its number.  Closed by the LRU,
 * the number may name a new file since `in`'s was deleted. */
bool fds_keeps_number(struct pcfs *fs, struct pcfs_inode *in);
/* Is fd's file the one `in` names (compared by file handle; `in` has
 * one: fds_keeps_number is true without)? */
bool fds_same_file(const struct pcfs_inode *in, int fd);
/* The inode's descriptor, open (reopened by handle if it was closed) and
 * held until fd_put; or -errno (ESTALE: the file is gone). */
int fd_hold(struct pcfs *fs, struct pcfs_inode *in);
void fd_put(struct pcfs *fs, struct pcfs_inode *in);
/* fd_hold, or reply the error to req and return -1. */
int fd_hold_or_reply(fuse_req_t req, struct pcfs_inode *in);
/* Close every reopenable descriptor not in use; how many. */
size_t fds_close_unused(struct pcfs *fs);
/* The inode goes: its descriptor and handle too. */
void fds_release(struct pcfs *fs, struct pcfs_inode *in);
/* A call that makes a descriptor failed with err on its try-th attempt
 * (0 first): true if one more attempt is worth it (out of descriptors,
 * and the LRU closed some); else false, having logged a shortage. */
bool fds_retry(struct pcfs *fs, int err, int try);
/* openat(2), retried by fds_retry; -1 with errno. */
int fds_openat(struct pcfs *fs, int dirfd, const char *name, int flags);
/* pc_openat in the daemon's cache, retried by fds_retry; NULL with errno. */
struct pc_file *fds_pc_openat(struct pcfs *fs, int dirfd, const char *name, int flags, mode_t mode);
/* fds.c: limits per user.  An open file or directory of uid is counted
 * from its OPEN, CREATE or OPENDIR to its RELEASE: take it before
 * opening (0, or EMFILE: uid holds user_fd_limit already; root and the
 * daemon's own user are never refused), put it back at RELEASE or when
 * the open fails. */
int user_fd_take(struct pcfs *fs, uid_t uid);
void user_fd_put(struct pcfs *fs, uid_t uid);
/* user_fd_take for req's caller (*uid), or reply the error and false. */
bool user_fd_take_or_reply(fuse_req_t req, uid_t *uid);
/* The .pcfs-stats lines of these: file_handles (1: inodes reopen by
 * handle), inode_fds (reopenable descriptors open), inode_fd_limit,
 * inode_fd_evictions, inode_fd_reopens, inode_fds_pinned (inodes that keep
 * their descriptors: no handles); user_fd_limit, user_fd_refusals
 * and user_fds.UID (the open files and directories UID holds) for each
 * user holding any. */
void stats_fds(struct pcfs *fs, FILE *f);

/* times.c */
void times_data_changed(struct pcfs_inode *in);
void times_meta_changed(struct pcfs_inode *in);
void times_explicit_mtime(struct pcfs_inode *in, const struct timespec *mtime);
/* Fill *st for in (fstat of the backing file, the cached size and the
 * write times). */
int attr_of(struct pcfs *fs, struct pcfs_inode *in, struct stat *st);
/* Apply a pending mtime if the file's data is all written; true if
 * nothing is pending any more. */
bool times_try_settle(struct pcfs *fs, struct pcfs_inode *in, bool all_written);

/* entry.c: a name from the kernel that must not leave the directory ("",
 * ".", "..", or one with a '/'). */
bool entry_bad_name(const char *name);
/* entry.c: look name up in parent: the entry (with a lookup counted), or
 * -errno. */
int entry_lookup(struct pcfs *fs, struct pcfs_inode *parent, const char *name, struct fuse_entry_param *e);
/* ops_data.c: truncate through pagecache (fi: the open file, or NULL). */
int data_truncate(fuse_req_t req, struct pcfs_inode *in, off_t size, struct fuse_file_info *fi);

/* ops_meta.c / ops_data.c / stats.c */
void ops_meta_fill(struct fuse_lowlevel_ops *ops);
void ops_data_fill(struct fuse_lowlevel_ops *ops);
void stats_lookup(fuse_req_t req);
void stats_getattr(fuse_req_t req);
void stats_open(fuse_req_t req, struct fuse_file_info *fi);
/* The counters as text (caller frees); also what SIGUSR1 prints. */
char *stats_text(struct pcfs *fs, size_t *len);
/* SIGUSR1: the counters to syslog (and stderr with -f) and to -o
 * stats_file. */
void stats_report(struct pcfs *fs);
/* Replace the file `name` in the directory dirfd with len bytes of text,
 * by renaming a new file (mode 0600) over it: a reader sees the old text
 * or the new.  Nothing is resolved by path: a symlink at `name` is
 * replaced, not followed, and a directory renamed or replaced since
 * dirfd was opened does not move the write.  0, or -1 with errno. */
int stats_file_write(int dirfd, const char *name, const char *text, size_t len);
/* At exit: -o stats_file gets the counters taken before the final
 * write-back (text, freed here) and its outcome, unmount_status 0, or 1
 * and unmount_error <error> if error is not empty. */
void stats_final(struct pcfs *fs, char *text, size_t len, const char *error);

/* log.c: one line to syslog, and to stderr with -f (a daemon's stderr is
 * /dev/null), which main.c turns on with pcfs_log_to_stderr. */
__attribute__((format(printf, 2, 3))) void pcfs_log(int prio, const char *fmt, ...);
void pcfs_log_to_stderr(bool on);

/* reply.c: replies libfuse 3.14 cannot build */
int reply_open_direct(fuse_req_t req, uint64_t fh);
int reply_create_direct(fuse_req_t req, const struct fuse_entry_param *e, uint64_t fh);
void fill_entry(struct pcfs_inode *in, const struct stat *st, struct fuse_entry_param *e);

#define PCFS_TIMEOUT 1.0

#endif
