/* header_c11.c - include/pagecache.h compiles alone in strict ISO C11
 * (no GNU extensions, nothing included before it): built with the
 * library, so a header that needs more fails the build. */
#include <pagecache.h>

int pc_header_c11_check(void);
int pc_header_c11_check(void)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	return (int)sizeof(struct pc_file_info);
}
