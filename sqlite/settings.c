/*
 * settings.c - what a file asks of the cache: URI parameters, then
 * environment variables.
 *
 *   URI parameter   environment variable          what
 *   pc_memory=256M  PAGECACHE_SQLITE_MEMORY=256M  the cache's memory_limit
 *   pc_block=4096   PAGECACHE_SQLITE_BLOCK=4096   the cache's block_size
 *   pc_uncached=1   PAGECACHE_SQLITE_UNCACHED=1   PC_DONTCACHE on this file
 *
 * A URI parameter wins over the environment variable, which wins over the
 * configuration given to sqlite3_pagecache_register (the variables are for
 * programs whose URIs cannot be changed; a URI is the more particular
 * wish).  Memory and block size are the cache's, so only the open that
 * makes the cache decides them (cache.c).
 */
#include "vfs.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int64_t pcs_parse_size(const char *s)
{
	char *end;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end || v > (unsigned long long)(INT64_MAX >> shift))
		return -1;
	return (int64_t)(v << shift);
}

/* 1, 0, or -1 for what is no boolean (SQLite's words for them). */
static int parse_bool(const char *s)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i]))
			return 1;
		if (!strcasecmp(s, no[i]))
			return 0;
	}
	return -1;
}

/* The URI parameter `uri_name` of zName, else the environment variable. */
static const char *setting(const char *zName, const char *uri_name, const char *env_name)
{
	const char *v = zName ? sqlite3_uri_parameter(zName, uri_name) : NULL;
	return v ? v : getenv(env_name);
}

static int size_setting(const char *zName, const char *uri_name, const char *env_name, uint64_t *out,
			bool *set, const char **bad)
{
	const char *v = setting(zName, uri_name, env_name);
	if (!v)
		return 0;
	int64_t n = pcs_parse_size(v);
	if (n <= 0) {
		*bad = uri_name;
		return SQLITE_MISUSE;
	}
	*out = (uint64_t)n;
	*set = true;
	return 0;
}

int pcs_settings_for(const char *zName, struct pcs_settings *s, const char **bad)
{
	memset(s, 0, sizeof(*s));
	int rc = size_setting(zName, "pc_memory", "PAGECACHE_SQLITE_MEMORY", &s->memory, &s->memory_set, bad);
	if (!rc)
		rc = size_setting(zName, "pc_block", "PAGECACHE_SQLITE_BLOCK", &s->block, &s->block_set, bad);
	if (rc)
		return rc;
	const char *v = setting(zName, "pc_uncached", "PAGECACHE_SQLITE_UNCACHED");
	if (v) {
		int b = parse_bool(v);
		if (b < 0) {
			*bad = "pc_uncached";
			return SQLITE_MISUSE;
		}
		s->uncached = b;
		s->uncached_set = true;
	}
	return 0;
}
