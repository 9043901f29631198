/*
 * scratchfs.c - a fresh file system of its own for a suite (files): an
 * ext4 or XFS made on a loop device over a sparse image in --dir, mounted
 * in a mount namespace of pcbench's own, and gone when the suite is done.
 *
 * Why fresh: file creation on a long-used file system depends on its
 * history (after many deletes XFS's inode allocator and a directory's
 * blocks make create rates swing by half between runs), so both sides of a
 * comparison, and every run of it, start from the same empty file system.
 *
 * Needs root, mount(8)'s loop support and mkfs.<type>; scratchfs_make says
 * why it cannot and the suite runs on --dir instead.  The mount namespace
 * (unshare(CLONE_NEWNS), made private) means a pcbench killed halfway
 * leaves no mount behind, `mount -o loop` sets up the loop device to
 * detach itself when its file system is unmounted, and the image is
 * removed as soon as it is mounted.  unshare moves only the calling thread
 * (and the threads it starts later) into the namespace, and gives it a
 * working directory and umask of its own; the suite's work runs there, and
 * nothing else of pcbench depends on either.
 */
#include "bench.h"

#include <sched.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>

extern char **environ;

/* XFS refuses file systems under 300 MB; the image is sparse, so its size
 * costs only what is written. */
#define SCRATCH_BYTES (1024 * BU_MiB)

/* Run argv quietly; true if it exited 0. */
static bool run_quiet(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		return false;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Mounts made from here on are this process's only. */
static bool private_mounts(char *why, size_t len)
{
	static int done; /* 1: done, -1: failed */

	static int err;

	if (!done) {
		done = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 ? 1 : -1;
		err = errno;
	}
	if (done < 0)
		snprintf(why, len, "no mount namespace of its own: %s", strerror(err));
	return done > 0;
}

bool scratchfs_make(struct scratchfs *s, const char *type, char *why, size_t len)
{
	char mkfs[32];

	memset(s, 0, sizeof(*s));
	snprintf(s->type, sizeof(s->type), "%s", type);
	snprintf(mkfs, sizeof(mkfs), "mkfs.%s", type);
	if (geteuid() != 0) {
		snprintf(why, len, "not root");
		return false;
	}
	if (!private_mounts(why, len))
		return false;
	char name[64];
	snprintf(name, sizeof(name), "pcbench-scratch-%s.img", type);
	bu_join(s->image, sizeof(s->image), bo.dir, name);
	snprintf(name, sizeof(name), "pcbench-scratch-%s", type);
	bu_join(s->mnt, sizeof(s->mnt), bo.dir, name);
	int fd = open(s->image, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)SCRATCH_BYTES) != 0) {
		snprintf(why, len, "image %s: %s", s->image, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(s->image);
		return false;
	}
	close(fd);
	char *mk_xfs[] = { mkfs, "-q", "-f", "-b", "size=4096", s->image, NULL };
	char *mk_ext4[] = { mkfs, "-q", "-F", "-b", "4096", s->image, NULL };
	if (!run_quiet(strcmp(type, "xfs") == 0 ? mk_xfs : mk_ext4)) {
		snprintf(why, len, "%s failed or is not installed (apt-get install %s)", mkfs,
			 strcmp(type, "xfs") == 0 ? "xfsprogs" : "e2fsprogs");
		unlink(s->image);
		return false;
	}
	(void)mkdir(s->mnt, 0755);
	char *mnt[] = { "mount", "-o", "loop", "-t", s->type, s->image, s->mnt, NULL };
	if (!run_quiet(mnt)) {
		snprintf(why, len, "mount -o loop of %s failed", s->image);
		rmdir(s->mnt);
		unlink(s->image);
		return false;
	}
	s->mounted = true;
	/* The loop device holds the image open: removed now, it goes with
	 * the mount even if pcbench dies before scratchfs_remove. */
	unlink(s->image);
	return true;
}

void scratchfs_remove(struct scratchfs *s)
{
	if (!s->mounted)
		return;
	if (umount(s->mnt) != 0 && umount2(s->mnt, MNT_DETACH) != 0)
		bu_warn("pcbench: umount %s:", s->mnt);
	rmdir(s->mnt);
	s->mounted = false;
}
