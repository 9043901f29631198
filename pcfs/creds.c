/*
 * creds.c - the daemon works on a request as the process that made it.
 *
 * A pcfs running as root with allow_other serves every user.  For the
 * calls that create files and change their metadata, and to check an
 * open (ops_data.c: may_open), the worker thread takes the caller's
 * fsuid, fsgid and supplementary groups (and, for creates, its umask:
 * FUSE_CAP_DONT_MASK), so that the backing file system applies its own
 * rules to the caller: permissions and ACLs,
 * a new file's owner and group (set-group-ID directories, default ACLs),
 * the set-user-ID and set-group-ID bits a create or chmod may keep, the
 * owner check on ACL xattrs, quotas.  No file is given away afterwards.
 *
 * Credentials are per thread in Linux, but glibc's setfsuid, setfsgid
 * and setgroups wrappers change every thread of the process (setxid
 * broadcast): the raw system calls change this thread's alone.  A
 * non-zero fsuid drops the file system capabilities (CAP_DAC_OVERRIDE,
 * CAP_FOWNER, CAP_FSETID, ...) from the effective set; fsuid 0 again
 * gives them back.  The umask is made per thread by unshare(CLONE_FS) in
 * each worker, once.
 *
 * The daemon also drops CAP_SYS_RESOURCE (creds_drop_resource) before
 * any thread exists: with it, write-back (by the daemon, as root) would
 * ignore the users' disk quotas.
 */
#include "pcfs.h"

#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

/* The daemon's own supplementary groups, given back after each request. */
static gid_t daemon_groups[64];
static int n_daemon_groups;
static bool can_switch;

/* This thread's: credentials switched now; its fs_struct its own (umask). */
static __thread bool switched, fs_unshared;

void creds_init(void)
{
	can_switch = geteuid() == 0;
	n_daemon_groups = getgroups(64, daemon_groups);
	if (n_daemon_groups < 0)
		n_daemon_groups = 0;
}

void creds_drop_resource(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &h, d) != 0)
		return;
	const unsigned bit = 1u << (CAP_SYS_RESOURCE % 32);
	unsigned i = CAP_SYS_RESOURCE / 32;
	if (!((d[i].effective | d[i].permitted) & bit))
		return;
	d[i].effective &= ~bit;
	d[i].permitted &= ~bit;
	d[i].inheritable &= ~bit;
	if (syscall(SYS_capset, &h, d) != 0)
		pcfs_log(LOG_WARNING, "cannot drop CAP_SYS_RESOURCE (quotas will not hold for write-back): %s",
			 strerror(errno));
}

/* Back to the daemon's own credentials (root): fsuid first, which gives
 * the file system capabilities back. */
static void creds_restore(void)
{
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, 0);
	syscall(SYS_setgroups, (size_t)n_daemon_groups, daemon_groups);
}

/* The caller's supplementary groups, all of them (fewer could grant more:
 * a group's deny entry in an ACL, mode 0604): their count, in `some` or,
 * past 64, in *out (malloc'd; the caller frees it when it is not `some`),
 * or a negative errno when they cannot be read. */
static int caller_groups(fuse_req_t req, gid_t some[64], gid_t **out)
{
	*out = some;
	int n = fuse_req_getgroups(req, 64, some);
	if (n <= 64)
		return n;
	gid_t *all = malloc((size_t)n * sizeof(*all));
	int m = all ? fuse_req_getgroups(req, n, all) : -ENOMEM;
	if (m < 0 || m > n) {
		free(all);
		return m < 0 ? m : -EAGAIN; /* joined a group meanwhile */
	}
	*out = all;
	return m;
}

int creds_begin(fuse_req_t req, unsigned what)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	/* The umask, whoever the daemon is: the kernel sends modes unmasked. */
	if ((what & CREDS_UMASK) && !fs_unshared && !(fs_unshared = unshare(CLONE_FS) == 0))
		pcfs_log(LOG_ERR, "unshare(CLONE_FS): %s: a create ignores the caller's umask", strerror(errno));
	if ((what & CREDS_UMASK) && fs_unshared)
		umask(ctx->umask);
	if (!can_switch || switched)
		return 0;
	if (ctx->uid == 0 && ctx->gid == 0)
		return 0; /* root: as the daemon is */
	/* Groups that cannot be read fail the request. */
	gid_t some[64], *groups;
	int n = caller_groups(req, some, &groups);
	int err = n < 0 ? -n : 0;
	if (!err && syscall(SYS_setgroups, (size_t)n, groups) != 0)
		err = errno;
	if (groups != some)
		free(groups);
	/* setfsuid and setfsgid return the old id, not an error: asked again
	 * (-1 changes nothing), they say whether the switch took. */
	if (!err) {
		syscall(SYS_setfsgid, ctx->gid);
		syscall(SYS_setfsuid, ctx->uid);
		if ((uid_t)syscall(SYS_setfsuid, -1) != ctx->uid || (gid_t)syscall(SYS_setfsgid, -1) != ctx->gid)
			err = EPERM;
	}
	if (err) {
		creds_restore();
		pcfs_log(LOG_ERR, "cannot take the credentials of uid %u: %s", (unsigned)ctx->uid, strerror(err));
		return -err; /* never done as root instead */
	}
	switched = true;
	return 1;
}

void creds_end(int begun)
{
	if (begun <= 0)
		return;
	creds_restore();
	switched = false;
}

bool creds_caller_in_group(fuse_req_t req, gid_t gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (ctx->gid == gid)
		return true;
	gid_t some[64], *groups;
	int n = caller_groups(req, some, &groups);
	bool in = false;
	for (int i = 0; i < n && !in; i++)
		in = groups[i] == gid;
	if (groups != some)
		free(groups);
	return in;
}
