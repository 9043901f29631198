/*
 * entry.c - names in a directory: which names the kernel may pass, and an
 * entry looked up (with a lookup counted on its inode).  Shared by the
 * metadata operations (ops_meta.c) and create (ops_data.c), below both.
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
