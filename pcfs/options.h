/* options.h - pcfs's command line (options.c). */
#ifndef PCFS_OPTIONS_H
#define PCFS_OPTIONS_H

#include <stdio.h>

struct cmdline {
	struct pcfs_options opt;
	char fuse_opts[4096]; /* FUSE options passed on, comma separated */
};

/* One line "pcfs: ..." on stderr, exit status 1. */
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);
void usage(FILE *out);
/* n as the user would write it: "256K", "3M", or bytes. */
const char *size_text(size_t n, char buf[32]);
void parse_cmdline(struct cmdline *cl, int argc, char **argv);
/* Check BACKING_DIR, MOUNTPOINT and -o stats_file (die on a bad one; the
 * last's directory is opened: opt->stats_dirfd, stats_name); the O_PATH
 * descriptor of BACKING_DIR. */
int check_paths(struct pcfs_options *opt);

#endif
