/*
 * entry.c - names in a directory: which names the kernel may pass, an
 * entry looked up (with a lookup counted on its inode), and a node just
 * made becoming its caller's.  Shared by the metadata operations
 * (ops_meta.c) and create (ops_data.c), below both.
 */
#include "pcfs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

bool entry_bad_name(const char *name)
{
	return !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..");
}

int entry_lookup(struct pcfs *fs, struct pcfs_inode *parent, const char *name, struct fuse_entry_param *e)
{
	if (entry_bad_name(name))
		return -ENOENT;
	int dirfd = fd_hold(fs, parent);
	if (dirfd < 0)
		return dirfd;
	int fd = fds_openat(fs, dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int err = fd < 0 ? -errno : 0;
	fd_put(fs, parent);
	if (err)
		return err;
	struct stat st;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
		err = -errno;
		close(fd);
		return err;
	}
	struct pcfs_inode *in = inode_get(fs, fd, &st);
	if (!in)
		return -ENOMEM;
	err = attr_of(fs, in, &st);
	if (err) {
		inode_forget(fs, in, 1);
		return err;
	}
	fill_entry(in, &st, e);
	return 0;
}

/*
 * A node the daemon just made in dirfd, for the program that asked: with
 * allow_other, a daemon running as root would otherwise leave every file
 * another user creates owned by root, which that user could then not
 * write.  Owned by the caller's uid, and by its gid unless the directory
 * is set-group-ID (the backing file system gave it the directory's group,
 * as it would have).  A daemon that is not root cannot give files away
 * (the usual FUSE rule): they stay its own, as documented in the README.
 * 0 or an errno; AT_SYMLINK_NOFOLLOW: a symlink itself, not its target.
 */
int node_give_to_caller(fuse_req_t req, int dirfd, const char *name)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (geteuid() != 0 || (ctx->uid == geteuid() && ctx->gid == getegid()))
		return 0;
	struct stat dir;
	if (fstatat(dirfd, "", &dir, AT_EMPTY_PATH) != 0)
		return errno;
	gid_t gid = (dir.st_mode & S_ISGID) ? (gid_t)-1 : ctx->gid;
	return fchownat(dirfd, name, ctx->uid, gid, AT_SYMLINK_NOFOLLOW) ? errno : 0;
}
