/*
 * sysmem.c - how much memory the machine can give this process now: what
 * pc_cache_new checks memory_limit against (arena.c), so that a cache the
 * machine cannot back fails with ENOMEM at once instead of running the
 * machine out of memory (and into the OOM killer) as it fills.
 *
 * The figure is the smallest of
 *   - MemAvailable of /proc/meminfo: free memory plus what the kernel can
 *     reclaim without swapping (swap is not counted: a cache in swap is
 *     slower than the device it caches);
 *   - for each memory cgroup the process is in, and each of its ancestors
 *     up to the root of the cgroup mount (a container's own root
 *     included), the room left under the limit: the limit less the
 *     cgroup's working set, i.e. its usage less its inactive file pages
 *     (what container tools count, since the kernel reclaims those first).
 *     cgroup v2: memory.max - memory.current + inactive_file of memory.stat;
 *     cgroup v1: memory.limit_in_bytes - memory.usage_in_bytes +
 *     total_inactive_file.
 * Missing files (no /proc, no cgroup mount at /sys/fs/cgroup, no limit)
 * constrain nothing; when nothing is known the result is UINT64_MAX.
 * The kernel checks RLIMIT_AS, RLIMIT_DATA and, in vm.overcommit_memory
 * mode 2, the commit limit itself when the arena is mapped.
 */
#include "lib/sysmem.h"

#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CGROUP_ROOT "/sys/fs/cgroup"
#define CGROUP_V1_MEMORY_ROOT "/sys/fs/cgroup/memory"

/* The value after `key` in a "key value" file (/proc/meminfo's "kB"
 * suffix is the caller's to apply); false if the file or key is missing. */
static bool read_keyed_u64(const char *path, const char *key, uint64_t *out)
{
	FILE *fp = fopen(path, "re");
	if (!fp)
		return false;
	char line[256];
	size_t klen = strlen(key);
	bool found = false;
	while (!found && fgets(line, sizeof(line), fp)) {
		if (strncmp(line, key, klen) == 0 && (line[klen] == ' ' || line[klen] == '\t')) {
			*out = strtoull(line + klen, NULL, 10);
			found = true;
		}
	}
	fclose(fp);
	return found;
}

/* A file holding one number; false if missing or not a number ("max"). */
static bool read_u64_file(const char *path, uint64_t *out)
{
	FILE *fp = fopen(path, "re");
	if (!fp)
		return false;
	char buf[64];
	bool ok = fgets(buf, sizeof(buf), fp) && buf[0] >= '0' && buf[0] <= '9';
	if (ok)
		*out = strtoull(buf, NULL, 10);
	fclose(fp);
	return ok;
}

static uint64_t meminfo_available(void)
{
	uint64_t kb;
	if (!read_keyed_u64("/proc/meminfo", "MemAvailable:", &kb))
		return UINT64_MAX;
	return kb * 1024;
}

/* The names of a cgroup version's memory files. */
struct cgroup_files {
	const char *root;   /* where that hierarchy is mounted */
	const char *limit;
	const char *usage;
	const char *inactive_key; /* in memory.stat */
};

static const struct cgroup_files cgroup_v2 = { CGROUP_ROOT, "memory.max", "memory.current", "inactive_file" };
static const struct cgroup_files cgroup_v1 = { CGROUP_V1_MEMORY_ROOT, "memory.limit_in_bytes",
					       "memory.usage_in_bytes", "total_inactive_file" };

/* Room under the limit of the cgroup in directory dir, or UINT64_MAX. */
static uint64_t cgroup_dir_room(const char *dir, const struct cgroup_files *cf)
{
	char path[4200];
	uint64_t limit, usage, inactive = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, cf->limit);
	if (!read_u64_file(path, &limit))
		return UINT64_MAX;
	snprintf(path, sizeof(path), "%s/%s", dir, cf->usage);
	if (!read_u64_file(path, &usage))
		return UINT64_MAX;
	snprintf(path, sizeof(path), "%s/memory.stat", dir);
	read_keyed_u64(path, cf->inactive_key, &inactive);
	uint64_t working_set = usage > inactive ? usage - inactive : 0;
	return limit > working_set ? limit - working_set : 0;
}

/* The least room of the cgroup at `rel` (a path in the hierarchy) and of
 * its ancestors, up to and with the mount's root. */
static uint64_t cgroup_path_room(const char *rel, const struct cgroup_files *cf)
{
	char dir[4096];
	size_t root_len = strlen(cf->root);
	if (snprintf(dir, sizeof(dir), "%s%s", cf->root, rel) >= (int)sizeof(dir))
		return UINT64_MAX;
	uint64_t room = UINT64_MAX;
	for (;;) {
		room = u64_min(room, cgroup_dir_room(dir, cf));
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < root_len)
			break;
		*slash = '\0';
	}
	return room;
}

/* Lines of /proc/self/cgroup: "0::/path" (v2), "N:a,memory,b:/path" (v1). */
static uint64_t cgroup_room(void)
{
	FILE *fp = fopen("/proc/self/cgroup", "re");
	if (!fp)
		return UINT64_MAX;
	uint64_t room = UINT64_MAX;
	char line[4096];
	while (fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = '\0';
		char *ctrl = strchr(line, ':');
		char *rel = ctrl ? strchr(ctrl + 1, ':') : NULL;
		if (!rel)
			continue;
		*rel++ = '\0';
		ctrl++;
		if (*ctrl == '\0') {
			room = u64_min(room, cgroup_path_room(rel, &cgroup_v2));
			continue;
		}
		for (char *save, *name = strtok_r(ctrl, ",", &save); name; name = strtok_r(NULL, ",", &save))
			if (strcmp(name, "memory") == 0)
				room = u64_min(room, cgroup_path_room(rel, &cgroup_v1));
	}
	fclose(fp);
	return room;
}

uint64_t sysmem_available(void)
{
	return u64_min(meminfo_available(), cgroup_room());
}
