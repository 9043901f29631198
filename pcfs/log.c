/*
 * log.c - pcfs's messages: to syslog always, and to stderr as well while
 * it runs in the foreground (main.c says so once its options are read).
 * The lowest file of pcfs: every other one may log.
 */
#include "pcfs.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <syslog.h>

static atomic_bool to_stderr;

void pcfs_log_to_stderr(bool on)
{
	atomic_store_explicit(&to_stderr, on, memory_order_relaxed);
}

void pcfs_log(int prio, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsyslog(prio, fmt, ap);
	va_end(ap);
	if (atomic_load_explicit(&to_stderr, memory_order_relaxed)) {
		va_start(ap, fmt);
		fputs("pcfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
}
