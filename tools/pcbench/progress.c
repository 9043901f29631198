/*
 * progress.c - where the run is.  On a terminal (stderr) a line redrawn
 * four times a second: suite, workload, path, percent of the step, the
 * current rate, the step's time left and the run's, cut to the terminal's
 * width.  Otherwise one plain line per step.  A thread of its own draws
 * it: the workloads only say what step they are in and how far it is
 * (a byte count they keep anyway, a counter they advance once per file or
 * run, or the clock for a timed phase), so that little is added to their
 * timed loops.
 *
 * Three kinds of step:
 *   bytes: `total` bytes, the poll gives bytes done; rate in MiB/s.
 *   timed: a phase that runs `total` ns; percent by the clock, and a rate
 *          in MiB/s when a poll of bytes done is given (the warm-read
 *          loops give none: counting in them would slow what they time).
 *   count: `total` units (files, runs, caches) advanced by prog_advance;
 *          rate in units/s.
 */
#include "bench.h"

#include <sys/ioctl.h>

enum prog_kind { PROG_BYTES, PROG_TIMED, PROG_COUNT };

static struct {
	pthread_mutex_t lock;
	pthread_t th;
	bool tty, started;
	atomic_bool stop;
	char suite[32], workload[96], path[48], unit[16];
	int index, count;
	enum prog_kind kind;
	uint64_t total;          /* bytes, ns or units, by kind */
	prog_poll_fn poll;       /* bytes done (bytes, timed kinds) */
	void *arg;
	_Atomic uint64_t advanced; /* units done (count kind) */
	uint64_t step_t0, suite_t0, run_t0;
	bool in_step;
	double suite_est_s, plan_left_s;
	uint64_t last_done, last_t;
	double rate;
} pg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void fmt_mmss(char *b, size_t len, double s)
{
	if (!(s >= 0) || s > 99 * 3600)
		snprintf(b, len, "?");
	else
		snprintf(b, len, "%d:%02d", (int)s / 60, (int)s % 60);
}

/* The run's time left: the remaining suites' estimates and what is left
 * of this suite's. */
static double run_left_s(uint64_t now)
{
	double in_suite = bu_secs(now - pg.suite_t0);
	double left = pg.suite_est_s - in_suite;

	return (left > 0 ? left : 0) + pg.plan_left_s;
}

/* Units done in the step: bytes (from the poll) or advanced units. */
static uint64_t units_done(void)
{
	if (pg.kind == PROG_COUNT)
		return atomic_load_explicit(&pg.advanced, memory_order_relaxed);
	return pg.poll ? pg.poll(pg.arg) : 0;
}

/* The rate over the last 200 ms or more; before the first 200 ms have
 * passed, over the step so far (a short step would show 0 otherwise). */
static void update_rate(uint64_t now, uint64_t done)
{
	uint64_t dt = now - pg.last_t;

	if (dt >= 200000000ull || pg.last_t == pg.step_t0) {
		double units = (double)(done - pg.last_done);

		pg.rate = dt ? units / bu_secs(dt) : 0;
		if (dt >= 200000000ull) {
			pg.last_done = done;
			pg.last_t = now;
		}
	}
}

static void fmt_rate(char *b, size_t len)
{
	if (pg.kind == PROG_COUNT)
		snprintf(b, len, " %.0f %s/s", pg.rate, pg.unit);
	else if (pg.poll)
		snprintf(b, len, " %.1f MiB/s", pg.rate / BU_MiB);
	else
		b[0] = 0;
}

/* Columns of the terminal (stderr), 80 when it cannot say. */
static int term_width(void)
{
	struct winsize ws;

	return ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

static void draw(void)
{
	uint64_t now = bu_now_ns(), done = units_done();
	char step_left[16], run_left[16], rate[40], line[512];

	update_rate(now, done);
	fmt_rate(rate, sizeof(rate));
	uint64_t progress = pg.kind == PROG_TIMED ? now - pg.step_t0 : done;
	double frac = pg.total ? (double)progress / (double)pg.total : 0;
	if (frac > 1)
		frac = 1;
	double el = bu_secs(now - pg.step_t0);
	fmt_mmss(step_left, sizeof(step_left), frac > 0.01 ? el / frac - el : -1);
	fmt_mmss(run_left, sizeof(run_left), run_left_s(now));
	int n = snprintf(line, sizeof(line), "[%d/%d %s] %s / %s %3.0f%%%s, step left %s, run left ~%s", pg.index,
			 pg.count, pg.suite, pg.workload, pg.path, frac * 100, rate, step_left, run_left);
	int width = term_width() - 1; /* the last column would wrap */
	if (n > width && width > 0)
		n = width;
	fprintf(stderr, "\r\033[K%.*s", n, line);
}

static void *progress_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&pg.stop)) {
		bu_sleep_ms(250);
		pthread_mutex_lock(&pg.lock);
		if (pg.in_step)
			draw();
		pthread_mutex_unlock(&pg.lock);
	}
	return NULL;
}

void prog_init(void)
{
	pg.tty = isatty(STDERR_FILENO);
	pg.run_t0 = bu_now_ns();
	if (pg.tty && pthread_create(&pg.th, NULL, progress_main, NULL) == 0)
		pg.started = true;
}

void prog_plan(double total_s)
{
	pthread_mutex_lock(&pg.lock);
	pg.plan_left_s = total_s;
	pthread_mutex_unlock(&pg.lock);
}

void prog_suite(const char *suite, int index, int count, double est_s)
{
	pthread_mutex_lock(&pg.lock);
	snprintf(pg.suite, sizeof(pg.suite), "%s", suite);
	pg.index = index;
	pg.count = count;
	pg.suite_t0 = bu_now_ns();
	pg.suite_est_s = est_s;
	pg.plan_left_s -= est_s;
	if (pg.plan_left_s < 0)
		pg.plan_left_s = 0;
	pthread_mutex_unlock(&pg.lock);
	if (!pg.tty) {
		char left[16];

		fmt_mmss(left, sizeof(left), est_s + pg.plan_left_s);
		fprintf(stderr, "pcbench: suite %d/%d %s (run left ~%s)\n", index, count, suite, left);
	}
}

static void step_begin(const char *workload, const char *path, enum prog_kind kind, uint64_t total,
		       prog_poll_fn poll, void *arg, const char *unit)
{
	pthread_mutex_lock(&pg.lock);
	snprintf(pg.workload, sizeof(pg.workload), "%s", workload);
	snprintf(pg.path, sizeof(pg.path), "%s", path);
	snprintf(pg.unit, sizeof(pg.unit), "%s", unit ? unit : "");
	pg.kind = kind;
	pg.total = total;
	pg.poll = poll;
	pg.arg = arg;
	atomic_store(&pg.advanced, 0);
	pg.step_t0 = pg.last_t = bu_now_ns();
	pg.last_done = 0;
	pg.rate = 0;
	pg.in_step = true;
	pthread_mutex_unlock(&pg.lock);
	if (!pg.tty)
		fprintf(stderr, "pcbench: %s: %s / %s\n", pg.suite, workload, path);
}

void prog_step(const char *workload, const char *path, uint64_t total, prog_poll_fn poll, void *arg)
{
	step_begin(workload, path, PROG_BYTES, total, poll, arg, NULL);
}

void prog_step_timed(const char *workload, const char *path, uint64_t ns, prog_poll_fn poll, void *arg)
{
	step_begin(workload, path, PROG_TIMED, ns, poll, arg, NULL);
}

void prog_step_count(const char *workload, const char *path, uint64_t total, const char *unit)
{
	step_begin(workload, path, PROG_COUNT, total, NULL, NULL, unit);
}

void prog_advance(uint64_t n)
{
	atomic_fetch_add_explicit(&pg.advanced, n, memory_order_relaxed);
}

void prog_step_done(void)
{
	pthread_mutex_lock(&pg.lock);
	pg.in_step = false;
	pg.poll = NULL;
	if (pg.tty)
		fprintf(stderr, "\r\033[K");
	pthread_mutex_unlock(&pg.lock);
}

void prog_end(void)
{
	if (pg.started) {
		atomic_store(&pg.stop, true);
		pthread_join(pg.th, NULL);
		fprintf(stderr, "\r\033[K");
	}
	fprintf(stderr, "pcbench: done in %.1f s\n", bu_secs(bu_now_ns() - pg.run_t0));
}
