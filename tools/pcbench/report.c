/*
 * report.c - the results of a run: kept in order of measurement, printed
 * as one table per workload (every path beside the others, each with its
 * ratio to kernel-buffered's) or, for the old pcbench's workloads, as its
 * table of lines (report_pairs), summed up as PASS/FAIL, and written as
 * JSON with --json.  A result stays where res_add put it until the end
 * of the run: a suite may fill it in while it adds others.
 */
#include <sys/utsname.h>

#include "bench.h"

/* In blocks of RES_BLOCK results, each allocated once: a result stays
 * where it is.  A block is large enough that malloc maps it apart from
 * its heap (as the one array of results did), which suite metadata
 * measures. */
#define RES_BLOCK 256
#define RES_BLOCKS 4096
static struct bres *blocks[RES_BLOCKS];
static size_t nresults;

static struct bres *result(size_t i)
{
	return &blocks[i / RES_BLOCK][i % RES_BLOCK];
}

static void fill_nan(struct bres *r)
{
	r->mib_s = r->ops_s = NAN;
	r->p50_us = r->p99_us = r->p999_us = NAN;
	r->peak_dirty_bytes = r->reads_per_write = r->cached_after_bytes = NAN;
	r->share = r->value = r->writes = r->device_reads_4k = r->proc_read_bytes = NAN;
	r->ratio = NAN;
	r->pass = -1;
}

struct bres *res_add(const char *suite, const char *workload, const char *path)
{
	if (nresults % RES_BLOCK == 0) {
		if (nresults / RES_BLOCK == RES_BLOCKS)
			bu_die("pcbench: more than %d results", RES_BLOCK * RES_BLOCKS);
		blocks[nresults / RES_BLOCK] = malloc(RES_BLOCK * sizeof(struct bres));
		if (!blocks[nresults / RES_BLOCK])
			bu_die("out of memory");
	}
	struct bres *r = result(nresults++);

	memset(r, 0, sizeof(*r));
	snprintf(r->suite, sizeof(r->suite), "%s", suite);
	snprintf(r->workload, sizeof(r->workload), "%s", workload);
	snprintf(r->path, sizeof(r->path), "%s", path);
	fill_nan(r);
	return r;
}

struct bres *res_at(size_t i)
{
	return i < nresults ? result(i) : NULL;
}

void res_figure(struct bres *r, double v)
{
	if (!r)
		return;
	r->value = v;
	if (!strcmp(r->unit, "MiB/s"))
		r->mib_s = v;
	else if (!strcmp(r->unit, "KB/s"))
		r->mib_s = v / 1024;
	else if (strstr(r->unit, "/s"))
		r->ops_s = v;
}

double res_value(const struct bres *r)
{
	return r ? r->value : NAN;
}

static void vappend(char *buf, size_t len, const char *sep, const char *fmt, va_list ap)
{
	size_t l = strlen(buf);

	if (l && l + strlen(sep) < len) {
		snprintf(buf + l, len - l, "%s", sep);
		l += strlen(sep);
	}
	if (l < len)
		vsnprintf(buf + l, len - l, fmt, ap);
}

void res_target(struct bres *r, bool ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vappend(r->target, sizeof(r->target), "; ", fmt, ap);
	va_end(ap);
	/* which of several targets was missed */
	if (!ok && strlen(r->target) + 9 < sizeof(r->target))
		strcat(r->target, " [missed]");
	r->pass = (r->pass != 0) && ok;
}

/* Append the stated target (fmt, ap) marked not evaluated for `why`. */
static void append_unjudged(struct bres *r, const char *why, const char *fmt, va_list ap)
{
	char mark[200];

	vappend(r->target, sizeof(r->target), "; ", fmt, ap);
	snprintf(mark, sizeof(mark), " [not evaluated: %s]", why);
	if (strlen(r->target) + strlen(mark) < sizeof(r->target))
		strcat(r->target, mark);
	r->part_unjudged = true;
}

void res_target_na(struct bres *r, const char *base, const char *fmt, ...)
{
	va_list ap;
	char why[80];
	struct bpath bp = { .name = base };

	snprintf(why, sizeof(why), "%s %s", base,
		 path_selected(&bp) ? "failed or not measured" : "not selected by --only");
	va_start(ap, fmt);
	append_unjudged(r, why, fmt, ap);
	va_end(ap);
}

void res_target_unjudged(struct bres *r, const char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	append_unjudged(r, why, fmt, ap);
	va_end(ap);
}

bool res_base_ok(const struct bres *k)
{
	return k && !k->error[0];
}

void res_note(struct bres *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vappend(r->note, sizeof(r->note), "; ", fmt, ap);
	va_end(ap);
}

struct bres *res_find(const char *suite, const char *workload, const char *path)
{
	for (size_t i = nresults; i-- > 0;)
		if (!strcmp(result(i)->suite, suite) && !strcmp(result(i)->workload, workload) &&
		    !strcmp(result(i)->path, path))
			return result(i);
	return NULL;
}

void res_latency(struct bres *r, uint64_t *lat_ns, size_t n)
{
	if (!n)
		return;
	bu_sort_u64(lat_ns, n);
	r->p50_us = (double)bu_percentile(lat_ns, n, 50) / 1e3;
	r->p99_us = (double)bu_percentile(lat_ns, n, 99) / 1e3;
	r->p999_us = (double)bu_percentile(lat_ns, n, 99.9) / 1e3;
}

/* ------------------------------------------------------------ tables */

/* The figure a row is compared by: MiB/s where measured, else ops/s,
 * else the suite's own value. */
static double headline(const struct bres *r)
{
	if (!isnan(r->mib_s))
		return r->mib_s;
	if (!isnan(r->ops_s))
		return r->ops_s;
	return r->value;
}

/* What a row's ratio divides by: kernel-buffered's row of the workload,
 * for every other row (as in the interleaved table, and as the targets
 * are stated: the seeds compare each path with buffered writes). */
static const struct bres *counterpart(const struct bres *r)
{
	if (!strcmp(r->path, "kernel-buffered"))
		return NULL;
	return res_find(r->suite, r->workload, "kernel-buffered");
}

static void fmt_fig(char *b, size_t len, double v, const char *f)
{
	if (isnan(v))
		snprintf(b, len, "-");
	else
		snprintf(b, len, f, v);
}

static void fmt_bytes(char *b, size_t len, double v)
{
	if (isnan(v))
		snprintf(b, len, "-");
	else if (v >= BU_MiB)
		snprintf(b, len, "%.1fM", v / BU_MiB);
	else if (v >= BU_KiB)
		snprintf(b, len, "%.1fK", v / BU_KiB);
	else
		snprintf(b, len, "%.0f", v);
}

static void print_result_row(const struct bres *r)
{
	char mib[24], ops[24], p50[24], p99[24], p999[24], dirty[24], rpw[24], cached[24], ratio[40];
	const struct bres *k = counterpart(r);

	if (r->error[0]) {
		printf("  %-26s error: %s\n", r->path, r->error);
		return;
	}
	fmt_fig(mib, sizeof(mib), r->mib_s, "%.1f");
	fmt_fig(ops, sizeof(ops), r->ops_s, "%.0f");
	fmt_fig(p50, sizeof(p50), r->p50_us, "%.0f");
	fmt_fig(p99, sizeof(p99), r->p99_us, "%.0f");
	fmt_fig(p999, sizeof(p999), r->p999_us, "%.0f");
	fmt_bytes(dirty, sizeof(dirty), r->peak_dirty_bytes);
	fmt_fig(rpw, sizeof(rpw), r->reads_per_write, "%.3f");
	fmt_bytes(cached, sizeof(cached), r->cached_after_bytes);
	if (k && !k->error[0] && headline(k) > 0 && !isnan(headline(r)))
		snprintf(ratio, sizeof(ratio), "%.2fx", headline(r) / headline(k));
	else
		snprintf(ratio, sizeof(ratio), "-");
	printf("  %-26s %9s %10s %7s %7s %7s %8s %6s %8s %-20s %s%s%s\n", r->path, mib, ops, p50, p99, p999,
	       dirty, rpw, cached, ratio, r->target, r->pass < 0 ? "" : " ",
	       r->pass < 0 ? "" : !r->pass ? "FAIL" : r->part_unjudged ? "PASS (what was evaluated)" : "PASS");
}

void report_workload(const char *suite, const char *workload)
{
	bool first = true;

	for (size_t i = 0; i < nresults; i++) {
		const struct bres *r = result(i);

		if (strcmp(r->suite, suite) || strcmp(r->workload, workload))
			continue;
		if (first) {
			printf("\n-- %s: %s\n", suite, workload);
			printf("  %-26s %9s %10s %7s %7s %7s %8s %6s %8s %-20s %s\n", "path", "MiB/s", "ops/s",
			       "p50us", "p99us", "p99.9us", "dirty^", "r/w", "cached", "vs k-buffered",
			       "target");
			first = false;
		}
		print_result_row(r);
	}
	for (size_t i = 0; i < nresults; i++) {
		const struct bres *r = result(i);

		if (!strcmp(r->suite, suite) && !strcmp(r->workload, workload) && r->note[0])
			printf("     %s: %s\n", r->path, r->note);
	}
}

/* ------------------------------------------------------------ pairs */

static void fmt_num(char *b, size_t len, double v)
{
	if (isnan(v))
		snprintf(b, len, "-");
	else if (v >= 1e6)
		snprintf(b, len, "%.0f", v);
	else if (v >= 100)
		snprintf(b, len, "%.1f", v);
	else
		snprintf(b, len, "%.2f", v);
}

/* The figure judged and the ratio of a line.  A size per 4 KiB folio
 * (metadata) is judged as its share of the folio, in the ratio column. */
static void pair_columns(const struct bres *base, const struct bres *pc, char *p, size_t plen, char *ratio,
			 size_t rlen)
{
	snprintf(ratio, rlen, "-");
	if (!pc || isnan(pc->value)) {
		snprintf(p, plen, pc ? "error" : "-");
		return;
	}
	if (!strcmp(pc->unit, "B/folio")) {
		snprintf(p, plen, "%.1f", pc->value);
		snprintf(ratio, rlen, "%.2f %%", pc->value * 100.0 / 4096.0);
		return;
	}
	fmt_num(p, plen, pc->value);
	if (base && !isnan(base->value) && base->value > 0)
		snprintf(ratio, rlen, "%.2fx", isnan(pc->ratio) ? pc->value / base->value : pc->ratio);
}

/* The results of one workload from result(i) on: its base and pc (either
 * may be missing); returns the index past them. */
static size_t pair_at(size_t i, const struct bres **base, const struct bres **pc)
{
	const struct bres *first = result(i);

	*base = *pc = NULL;
	for (; i < nresults && !strcmp(result(i)->suite, first->suite) &&
	       !strcmp(result(i)->workload, first->workload); i++) {
		if (result(i)->is_base)
			*base = result(i);
		else
			*pc = result(i);
	}
	return i;
}

void report_pairs(const char *suite)
{
	int w = 42;

	/* the workload column as wide as its longest name */
	for (size_t i = 0; i < nresults; i++)
		if (!strcmp(result(i)->suite, suite) && (int)strlen(result(i)->workload) > w)
			w = (int)strlen(result(i)->workload);
	printf("\n-- %s\n%-*s %-8s %14s %14s %8s %8s %s\n", suite, w, "workload", "unit", "kernel", "pagecache",
	       "ratio", "target", "result");
	for (size_t i = 0; i < nresults;) {
		const struct bres *base, *pc;
		char k[32], p[32], ratio[32];

		if (strcmp(result(i)->suite, suite)) {
			i++;
			continue;
		}
		i = pair_at(i, &base, &pc);
		const struct bres *any = pc ? pc : base;
		fmt_num(k, sizeof(k), res_value(base));
		pair_columns(base, pc, p, sizeof(p), ratio, sizeof(ratio));
		printf("%-*s %-8s %14s %14s %8s %8s %s\n", w, any->workload, any->unit, k, p, ratio,
		       pc && pc->target[0] ? pc->target : "-",
		       !pc || pc->pass < 0 ? "-" : pc->pass ? "PASS" : "FAIL");
	}
	for (size_t i = 0; i < nresults; i++)
		if (!strcmp(result(i)->suite, suite) && result(i)->note[0])
			printf("  %s: %s\n", result(i)->workload, result(i)->note);
}

/* ------------------------------------------------------------ JSON */

static void json_str(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(fp, "\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", fp);
		else if (ch < 0x20)
			fprintf(fp, "\\u%04x", ch);
		else
			fputc(ch, fp);
	}
	fputc('"', fp);
}

static void json_num(FILE *fp, const char *key, double v, bool comma)
{
	fprintf(fp, "\"%s\": ", key);
	if (isnan(v) || isinf(v))
		fputs("null", fp);
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		fprintf(fp, "%.0f", v); /* counts and bytes: exact */
	else
		fprintf(fp, "%.9g", v);
	if (comma)
		fputs(", ", fp);
}

static void json_kv(FILE *fp, const char *key, const char *v, bool comma)
{
	fprintf(fp, "\"%s\": ", key);
	if (v && *v)
		json_str(fp, v);
	else
		fputs("null", fp);
	if (comma)
		fputs(", ", fp);
}

static void json_machine(FILE *fp, int argc, char **argv)
{
	struct utsname u;
	struct statfs sfs;
	char host[256] = "", cmd[2048] = "";
	static const char *const memtotal[] = { "MemTotal", NULL };

	gethostname(host, sizeof(host) - 1);
	uname(&u);
	for (int i = 0; i < argc; i++) {
		size_t l = strlen(cmd);

		snprintf(cmd + l, sizeof(cmd) - l, "%s%s", i ? " " : "", argv[i]);
	}
	fprintf(fp, "  \"machine\": {");
	json_kv(fp, "hostname", host, true);
	json_kv(fp, "kernel", u.release, true);
	json_kv(fp, "arch", u.machine, true);
	fprintf(fp, "\"cpus\": %ld, ", sysconf(_SC_NPROCESSORS_ONLN));
	json_num(fp, "mem_total_bytes", (double)bu_meminfo_bytes(memtotal), true);
	json_kv(fp, "fs", statfs(bo.dir, &sfs) == 0 ? bu_fs_name((unsigned long)sfs.f_type) : "", true);
	json_kv(fp, "dir", bo.dir, true);
	json_num(fp, "memory_limit_bytes", (double)bo.mem, true);
	json_kv(fp, "scale", bo.scale == SCALE_QUICK ? "quick" : bo.scale == SCALE_FULL ? "full" : "default",
		true);
	json_kv(fp, "command", cmd, false);
	fprintf(fp, "},\n");
}

static void json_result(FILE *fp, const struct bres *r, bool last)
{
	fprintf(fp, "    {");
	json_kv(fp, "suite", r->suite, true);
	json_kv(fp, "workload", r->workload, true);
	json_kv(fp, "path", r->path, true);
	json_num(fp, "mib_s", r->mib_s, true);
	json_num(fp, "ops_s", r->ops_s, true);
	json_num(fp, "p50_us", r->p50_us, true);
	json_num(fp, "p99_us", r->p99_us, true);
	json_num(fp, "p999_us", r->p999_us, true);
	json_num(fp, "peak_dirty_bytes", r->peak_dirty_bytes, true);
	json_num(fp, "reads_per_write", r->reads_per_write, true);
	json_num(fp, "cached_after_bytes", r->cached_after_bytes, true);
	json_num(fp, "share", r->share, true);
	json_num(fp, "writes", r->writes, true);
	json_num(fp, "device_reads_4k", r->device_reads_4k, true);
	json_num(fp, "proc_read_bytes", r->proc_read_bytes, true);
	json_num(fp, "value", r->value, true);
	json_kv(fp, "unit", r->unit, true);
	json_kv(fp, "target", r->target, true);
	fprintf(fp, "\"pass\": %s, ", r->pass < 0 ? "null" : r->pass ? "true" : "false");
	json_kv(fp, "error", r->error, true);
	json_kv(fp, "note", r->note, false);
	fprintf(fp, "}%s\n", last ? "" : ",");
}

static bool write_json(int argc, char **argv)
{
	FILE *fp = fopen(bo.json, "we");

	if (!fp) {
		bu_warn("pcbench: --json %s:", bo.json);
		return false;
	}
	fprintf(fp, "{\n");
	json_machine(fp, argc, argv);
	fprintf(fp, "  \"results\": [\n");
	for (size_t i = 0; i < nresults; i++)
		json_result(fp, result(i), i + 1 == nresults);
	fprintf(fp, "  ]\n}\n");
	if (fclose(fp) != 0) {
		bu_warn("pcbench: writing %s:", bo.json);
		return false;
	}
	printf("results written to %s\n", bo.json);
	return true;
}

bool report_finish(int argc, char **argv)
{
	int pass = 0, fail = 0, errors = 0;

	for (size_t i = 0; i < nresults; i++) {
		pass += result(i)->pass == 1;
		fail += result(i)->pass == 0;
		errors += result(i)->error[0] != '\0';
	}
	printf("\n%zu results; targets: %d PASS, %d FAIL; %d errors\n", nresults, pass, fail, errors);
	for (size_t i = 0; i < nresults; i++)
		if (result(i)->pass == 0)
			printf("  FAIL %s / %s / %s: %s\n", result(i)->suite, result(i)->workload, result(i)->path,
			       result(i)->target);
	return !bo.json || write_json(argc, argv);
}
