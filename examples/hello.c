/* Write through the cache, read back, fsync, close (see README.md). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <pagecache.h>

int main(void)
{
	struct pc_config cfg;
	pc_config_init(&cfg);                 /* defaults: 256 MiB, 256 KiB folios */
	cfg.memory_limit = 64u << 20;
	struct pc_cache *cache = pc_cache_new(&cfg);
	if (!cache)
		return perror("pc_cache_new"), 1;
	struct pc_file *f = pc_open(cache, "hello.dat", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!f)
		return perror("pc_open"), pc_cache_destroy(cache), 1;

	char buf[32] = "";
	int ok = pc_pwrite(f, "hello, world", 12, 12345, 0) == 12  /* any size, any offset */
		 && pc_pread(f, buf, sizeof(buf), 12345, 0) == 12    /* stops at the end */
		 && pc_fsync(f) == 0;                                 /* on the device */
	if (!ok)
		perror("hello.dat");
	if (pc_close(f) < 0)                  /* also reports earlier write errors */
		ok = 0, perror("pc_close");
	if (pc_cache_destroy(cache) < 0)
		ok = 0, perror("pc_cache_destroy");
	if (!ok || strcmp(buf, "hello, world") != 0)
		return 1;
	printf("read back \"%s\"\n", buf);
	return 0;
}
