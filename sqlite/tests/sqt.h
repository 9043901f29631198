/*
 * sqt.h - what the C tests of the SQLite VFS share: checks that say where
 * they failed, a fresh directory under $PC_TEST_DIR (the build tree, not
 * a tmpfs: pagecache opens with O_DIRECT), and SQL helpers.
 */
#ifndef SQT_H
#define SQT_H

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SQT_UNUSED __attribute__((unused))

static int sqt_failures;

#define CHECK(cond, ...)                                                                     \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                        \
			fputc('\n', stderr);                                                 \
			sqt_failures++;                                                      \
		}                                                                            \
	} while (0)

/* Stop the test: what follows depends on what failed. */
#define REQUIRE(cond, ...)                                                                   \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "%s:%d: REQUIRE(%s) failed: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                        \
			fputc('\n', stderr);                                                 \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

/* A fresh directory $PC_TEST_DIR/NAME (emptied), made the working one. */
SQT_UNUSED static void sqt_chdir_fresh(const char *name)
{
	const char *base = getenv("PC_TEST_DIR");
	char dir[PATH_MAX], cmd[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s/%s", base && *base ? base : ".", name);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0 || mkdir(dir, 0755) != 0 || chdir(dir) != 0) {
		fprintf(stderr, "cannot make %s: %s\n", dir, strerror(errno));
		exit(1);
	}
}

/* Run SQL; SQLITE_OK or the error code (message printed if want_ok). */
SQT_UNUSED static int sqt_exec(sqlite3 *db, const char *sql, int want_ok)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK && want_ok)
		fprintf(stderr, "SQL failed (%d, %s): %s\n", rc, err ? err : "", sql);
	sqlite3_free(err);
	return rc;
}

/* The first column of the first row as an integer; -1 if none or error. */
SQT_UNUSED static long long sqt_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The first column of the first row as text, into buf ("" if none). */
SQT_UNUSED static const char *sqt_text(sqlite3 *db, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *st;
	buf[0] = '\0';
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(buf, len, "(error: %s)", sqlite3_errmsg(db));
		return buf;
	}
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return buf;
}

/* Open `uri` (a URI: file:NAME?vfs=...); the result code, *db set. */
SQT_UNUSED static int sqt_open(const char *uri, sqlite3 **db)
{
	return sqlite3_open_v2(uri, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL);
}

SQT_UNUSED static int sqt_done(const char *name)
{
	if (sqt_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, sqt_failures);
		return 1;
	}
	printf("%s: passed\n", name);
	return 0;
}

#endif /* SQT_H */
