/*
 * cache.c - the process's one cache, shared by every connection.
 *
 * It is made at the first open of a database through the VFS, from the
 * base configuration (sqlite3_pagecache_register's, else
 * pc_config_init's) changed by that open's settings (settings.c).  Later
 * opens use it as it is: a memory limit or block size they ask for that
 * differs is logged (sqlite3_log, SQLITE_NOTICE) and not applied.
 *
 * PC_CFG_FLUSH_AT_EXIT is always on: a program that ends with exit(3)
 * and open connections (or data still to write of closed files) keeps
 * what it wrote, as it would through the kernel's page cache.  Without a
 * configuration of the program's own, PC_CFG_ALLOW_BUFFERED_BACKEND is on
 * too, so that a database on a file system without O_DIRECT (tmpfs) still
 * opens.
 *
 * A child of fork() cannot use its parent's cache (pagecache(7)): its
 * first open makes a cache of its own.  The parent's is left alone, not
 * destroyed: connections the child inherited may still point at it, and
 * their calls fail with EPERM (SQLITE_IOERR_*) as they should.
 */
#include "vfs.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pc_cache *cache;
static pid_t cache_pid;
static struct pc_config base, made; /* made: what the cache was made with */
static bool have_base;

int pcs_cache_set_base(const struct pc_config *cfg)
{
	int rc = SQLITE_OK;
	pthread_mutex_lock(&cache_lock);
	if (cache && cache_pid == getpid())
		rc = SQLITE_MISUSE;
	else {
		base = *cfg;
		have_base = true;
	}
	pthread_mutex_unlock(&cache_lock);
	return rc;
}

static void config_for(struct pc_config *cfg, const struct pcs_settings *s)
{
	if (have_base)
		*cfg = base;
	else {
		pc_config_init(cfg);
		cfg->flags |= PC_CFG_ALLOW_BUFFERED_BACKEND;
	}
	cfg->flags |= PC_CFG_FLUSH_AT_EXIT;
	if (s->memory_set)
		cfg->memory_limit = s->memory;
	if (s->block_set)
		cfg->block_size = s->block;
}

/* An open asked for what the cache was not made with: say so once. */
static void note_mismatch(const struct pcs_settings *s)
{
	static bool said;
	bool differs = (s->memory_set && s->memory != made.memory_limit) ||
		       (s->block_set && s->block != made.block_size);
	if (differs && !said) {
		said = true;
		sqlite3_log(SQLITE_NOTICE, "pagecache: pc_memory and pc_block apply at the first open of the "
			    "process; its cache keeps memory %llu, block %llu",
			    (unsigned long long)made.memory_limit, (unsigned long long)made.block_size);
	}
}

struct pc_cache *pcs_cache_get(const struct pcs_settings *s)
{
	pthread_mutex_lock(&cache_lock);
	if (cache && cache_pid == getpid()) {
		note_mismatch(s);
	} else {
		struct pc_config cfg;
		config_for(&cfg, s);
		cache = pc_cache_new(&cfg); /* a parent's cache is not ours to free */
		made = cfg;
		if (!made.memory_limit) { /* 0: the default */
			struct pc_config d;
			pc_config_init(&d);
			made.memory_limit = d.memory_limit;
		}
		cache_pid = getpid();
	}
	struct pc_cache *c = cache;
	int e = errno;
	pthread_mutex_unlock(&cache_lock);
	errno = e;
	return c;
}

uint64_t pcs_cache_memory(void)
{
	pthread_mutex_lock(&cache_lock);
	uint64_t v = cache && cache_pid == getpid() ? made.memory_limit : 0;
	pthread_mutex_unlock(&cache_lock);
	return v;
}

struct pc_cache *pcs_cache_current(void)
{
	pthread_mutex_lock(&cache_lock);
	struct pc_cache *c = cache_pid == getpid() ? cache : NULL;
	pthread_mutex_unlock(&cache_lock);
	return c;
}
