/*
 * api.c - the SQLite calls of the VFS, whichever SQLite it runs in.
 *
 * Loaded as an extension, the VFS must call the SQLite that loaded it
 * (a program may have its own, statically linked, copy), through the
 * routines sqlite3_load_extension hands over: the other files include
 * sqlite3ext.h, which turns every sqlite3_* call into a call through
 * sqlite3_api.  A program that links the library and calls
 * sqlite3_pagecache_register has handed nothing over: then sqlite3_api
 * points at the routines of the SQLite the library was linked with,
 * filled in here, the one file compiled as part of SQLite's "core" (so
 * that its sqlite3_* names are the functions themselves).
 */
#define SQLITE_CORE 1
#define sqlite3_api pcs_sqlite3_api /* as vfs.h names it */
#include <sqlite3ext.h>

#include <stdbool.h>
#include <stddef.h>

#if defined(__GNUC__)
#define PCS_HIDDEN __attribute__((visibility("hidden")))
#else
#define PCS_HIDDEN
#endif

/* What SQLITE_EXTENSION_INIT1 would define; set by the entry point or
 * by pcs_api_use_linked. */
PCS_HIDDEN const sqlite3_api_routines *sqlite3_api;

PCS_HIDDEN void pcs_api_use_linked(void);
PCS_HIDDEN bool pcs_api_ready(void);

/* Only the calls the VFS makes (vfs.h's files); the rest stay NULL. */
static const sqlite3_api_routines linked = {
	.free = sqlite3_free,
	.log = sqlite3_log,
	.malloc = sqlite3_malloc,
	.mprintf = sqlite3_mprintf,
	.uri_boolean = sqlite3_uri_boolean,
	.uri_parameter = sqlite3_uri_parameter,
	.vfs_find = sqlite3_vfs_find,
	.vfs_register = sqlite3_vfs_register,
};

void pcs_api_use_linked(void)
{
	const sqlite3_api_routines *none = NULL;
	__atomic_compare_exchange_n(&sqlite3_api, &none, &linked, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

bool pcs_api_ready(void)
{
	return __atomic_load_n(&sqlite3_api, __ATOMIC_ACQUIRE) != NULL;
}
