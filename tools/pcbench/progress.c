/*
 * progress.c - where the run is.  On a terminal (stderr) a line redrawn
 * four times a second: suite, workload, path, percent of the step,
 * current MiB/s, the step's time left and the run's.  Otherwise one plain
 * line per step.  A thread of its own draws it: the workloads only say
 * what step they are in and how to ask how far it is, so that nothing is
 * added to their timed loops.
 */
#include "bench.h"

static struct {
	pthread_mutex_t lock;
	pthread_t th;
	bool tty, started;
	atomic_bool stop;
	char suite[32], workload[96], path[48];
	int index, count;
	uint64_t total;          /* bytes, or ns when poll is NULL */
	prog_poll_fn poll;
	void *arg;
	uint64_t step_t0, suite_t0, run_t0;
	bool in_step;
	double suite_est_s, plan_left_s;
	uint64_t last_done, last_t;
	double mibs;
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

static void draw(void)
{
	uint64_t now = bu_now_ns(), done;
	double frac;
	char step_left[16], run_left[16], rate[24] = "";

	if (pg.poll) {
		done = pg.poll(pg.arg);
		if (now - pg.last_t > 200000000ull) {
			pg.mibs = (double)(done - pg.last_done) / BU_MiB / bu_secs(now - pg.last_t);
			pg.last_done = done;
			pg.last_t = now;
		}
		snprintf(rate, sizeof(rate), " %7.1f MiB/s", pg.mibs);
	} else {
		done = now - pg.step_t0;
	}
	frac = pg.total ? (double)done / (double)pg.total : 0;
	if (frac > 1)
		frac = 1;
	double el = bu_secs(now - pg.step_t0);
	fmt_mmss(step_left, sizeof(step_left), frac > 0.01 ? el / frac - el : -1);
	fmt_mmss(run_left, sizeof(run_left), run_left_s(now));
	fprintf(stderr, "\r\033[K[%d/%d %s] %.56s / %s %3.0f%%%s, step left %s, run left ~%s", pg.index, pg.count,
		pg.suite, pg.workload, pg.path, frac * 100, rate, step_left, run_left);
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

void prog_step(const char *workload, const char *path, uint64_t total, prog_poll_fn poll, void *arg)
{
	pthread_mutex_lock(&pg.lock);
	snprintf(pg.workload, sizeof(pg.workload), "%s", workload);
	snprintf(pg.path, sizeof(pg.path), "%s", path);
	pg.total = total;
	pg.poll = poll;
	pg.arg = arg;
	pg.step_t0 = pg.last_t = bu_now_ns();
	pg.last_done = 0;
	pg.mibs = 0;
	pg.in_step = true;
	pthread_mutex_unlock(&pg.lock);
	if (!pg.tty)
		fprintf(stderr, "pcbench: %s: %s / %s\n", pg.suite, workload, path);
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
