/*
 * extension.c - the loadable extension's entry point.
 *
 * SQLite names the entry point after the library's file name:
 * libpagecache_sqlite.so gives sqlite3_pagecachesqlite_init (the "lib"
 * prefix dropped, letters only, up to the first dot), so `.load PATH` and
 * sqlite3_load_extension(db, PATH, NULL, ...) need no entry point named.
 * It registers the VFS "pagecache" (not as the default) and stays loaded
 * for the life of the process (SQLITE_OK_LOAD_PERMANENTLY): connections
 * other than the loading one use the VFS too.
 */
#include "vfs.h"

PC_API int sqlite3_pagecachesqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

int sqlite3_pagecachesqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api)
{
	(void)db;
	SQLITE_EXTENSION_INIT2(api);
	int rc = pcs_register(NULL, 0);
	if (rc != SQLITE_OK) {
		*err = sqlite3_mprintf("pagecache: the VFS could not be registered (%d)", rc);
		return rc;
	}
	return SQLITE_OK_LOAD_PERMANENTLY;
}
