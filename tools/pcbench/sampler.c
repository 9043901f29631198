/*
 * sampler.c - dirty bytes and throughput over time, sampled by a thread.
 *
 * The kernel's dirty data is what /proc/meminfo says (Dirty + Writeback,
 * system-wide: other programs' dirty data counts too, so the value before
 * the run is kept as the baseline); pagecache's is its own stats
 * (dirty_bytes + writeback_bytes).  Throughput is the bytes the writers
 * added to *written between two samples.
 */
#include "bench.h"

static int64_t sample_dirty(const struct sampler *s)
{
	static const char *const names[] = { "Dirty", "Writeback", NULL };
	struct pc_stats st;

	if (!s->c)
		return bu_meminfo_bytes(names);
	pc_cache_stats(s->c, &st);
	return (int64_t)(st.dirty_bytes + st.writeback_bytes);
}

static void *sampler_main(void *arg)
{
	struct sampler *s = arg;
	uint64_t last_w = 0, last_t = s->t0;

	while (!atomic_load(&s->stop)) {
		bu_sleep_ms(SAMPLE_MS);
		uint64_t now = bu_now_ns();
		uint64_t w = s->written ? atomic_load_explicit(s->written, memory_order_relaxed) : 0;
		int64_t d = sample_dirty(s);

		if (d > s->peak)
			s->peak = d;
		if (s->n < SAMPLE_MAX) {
			s->t_s[s->n] = (float)bu_secs(now - s->t0);
			s->dirty_mib[s->n] = (float)((double)d / BU_MiB);
			s->mib_s[s->n] = (float)((double)(w - last_w) / BU_MiB / bu_secs(now - last_t));
			s->n++;
		}
		last_w = w;
		last_t = now;
	}
	return NULL;
}

void sampler_start(struct sampler *s, struct pc_cache *c, _Atomic uint64_t *written)
{
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->written = written;
	s->t_s = calloc(SAMPLE_MAX, sizeof(float));
	s->dirty_mib = calloc(SAMPLE_MAX, sizeof(float));
	s->mib_s = calloc(SAMPLE_MAX, sizeof(float));
	if (!s->t_s || !s->dirty_mib || !s->mib_s)
		bu_die("out of memory");
	s->baseline = sample_dirty(s);
	s->peak = s->baseline;
	s->t0 = bu_now_ns();
	if (pthread_create(&s->th, NULL, sampler_main, s) != 0)
		bu_die("pthread_create:");
}

void sampler_stop(struct sampler *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->th, NULL);
}

void sampler_free(struct sampler *s)
{
	free(s->t_s);
	free(s->dirty_mib);
	free(s->mib_s);
	s->t_s = s->dirty_mib = s->mib_s = NULL;
	s->n = 0;
}
