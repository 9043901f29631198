/*
 * svg.c - a small SVG writer for pcbench's plots: line charts (linear or
 * logarithmic x) and grouped bar charts, each a self-contained file with
 * its axes, ticks, labels and legend.  No dependency: the plots are text.
 */
#include "bench.h"

#define W 900
#define H 480
#define ML 80   /* margins: left, right, top, bottom */
#define MR 230
#define MT 50
#define MB 60

static const char *const colours[] = {
	"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
	"#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
};
#define NCOLOURS (int)(sizeof(colours) / sizeof(colours[0]))

const char *svg_path(const char *name)
{
	static char buf[PATH_MAX];

	if (!bo.svgdir)
		return NULL;
	bu_mkdir(bo.svgdir);
	bu_join(buf, sizeof(buf), bo.svgdir, name);
	return buf;
}

static void esc(FILE *fp, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", fp);
		else if (*s == '>')
			fputs("&gt;", fp);
		else if (*s == '&')
			fputs("&amp;", fp);
		else
			fputc(*s, fp);
	}
}

static FILE *begin(const char *file, const char *title)
{
	FILE *fp = fopen(file, "we");

	if (!fp) {
		bu_warn("pcbench: svg %s:", file);
		return NULL;
	}
	fprintf(fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		    "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
	fprintf(fp, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
	/* A long title goes on two lines, split after its last ": ". */
	const char *split = strlen(title) > 90 ? strstr(title, ": ") : NULL;

	for (const char *s = split; s && (s = strstr(s + 1, ": "));)
		split = s;
	fprintf(fp, "<text x=\"20\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">", split ? 18 : 28);
	if (split) {
		char first[256];

		snprintf(first, sizeof(first), "%.*s", (int)(split - title + 1), title);
		esc(fp, first);
		fprintf(fp, "</text>\n<text x=\"20\" y=\"36\" font-size=\"13\" font-weight=\"bold\">");
		esc(fp, split + 2);
	} else {
		esc(fp, title);
	}
	fprintf(fp, "</text>\n");
	return fp;
}

static int end(FILE *fp, const char *file)
{
	fprintf(fp, "</svg>\n");
	if (fclose(fp) != 0) {
		bu_warn("pcbench: writing %s:", file);
		return -1;
	}
	printf("plot written to %s\n", file);
	return 0;
}

/* A "nice" step (1, 2 or 5 times a power of ten) for about 5 ticks. */
static double nice_step(double range)
{
	double raw = range / 5, p = pow(10, floor(log10(raw))), m = raw / p;

	return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void fmt_tick(char *b, size_t len, double v)
{
	if (fabs(v) >= 1e6 || (fabs(v) < 0.01 && v != 0))
		snprintf(b, len, "%.0e", v);
	else
		snprintf(b, len, "%g", v);
}

static void axis_labels(FILE *fp, const char *xlabel, const char *ylabel)
{
	fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", ML + (W - ML - MR) / 2, H - 15);
	esc(fp, xlabel);
	fprintf(fp, "</text>\n<text transform=\"translate(20,%d) rotate(-90)\" text-anchor=\"middle\">",
		MT + (H - MT - MB) / 2);
	esc(fp, ylabel);
	fprintf(fp, "</text>\n");
	fprintf(fp, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", ML, MT,
		W - ML - MR, H - MT - MB);
}

/* Horizontal grid lines and y tick labels from 0 to ymax. */
static void y_ticks(FILE *fp, double ymax)
{
	double step = nice_step(ymax);
	char b[32];

	for (double v = 0; v <= ymax * 1.0001; v += step) {
		double y = H - MB - v / ymax * (H - MT - MB);

		fmt_tick(b, sizeof(b), v);
		fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			ML, W - MR, y, y, ML - 5, y + 4, b);
	}
}

static void legend(FILE *fp, const char *const *names, int n)
{
	for (int i = 0; i < n; i++) {
		int y = MT + 10 + i * 20;

		fprintf(fp, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\"/>"
			    "<text x=\"%d\" y=\"%d\">", W - MR + 15, y - 9, colours[i % NCOLOURS], W - MR + 35, y);
		esc(fp, names[i]);
		fprintf(fp, "</text>\n");
	}
}

/* The x range of the series; for a log axis only positive values count. */
static void x_range(const struct svg_series *s, int ns, bool logx, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (int i = 0; i < ns; i++)
		for (size_t k = 0; k < s[i].n; k++) {
			double x = s[i].x[k];

			if (logx && x <= 0)
				continue;
			*lo = x < *lo ? x : *lo;
			*hi = x > *hi ? x : *hi;
		}
	if (logx) {
		*lo = pow(10, floor(log10(*lo)));
		*hi = pow(10, ceil(log10(*hi)));
	} else {
		*lo = 0;
	}
	if (!(*hi > *lo))
		*hi = *lo + 1;
}

static void x_ticks(FILE *fp, double lo, double hi, bool logx)
{
	char b[32];

	if (logx) {
		for (double v = lo; v <= hi * 1.0001; v *= 10) {
			double x = ML + (log10(v) - log10(lo)) / (log10(hi) - log10(lo)) * (W - ML - MR);

			fmt_tick(b, sizeof(b), v);
			fprintf(fp, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>"
				    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
				x, x, MT, H - MB, x, H - MB + 16, b);
		}
		return;
	}
	double step = nice_step(hi - lo);
	for (double v = lo; v <= hi * 1.0001; v += step) {
		double x = ML + (v - lo) / (hi - lo) * (W - ML - MR);

		fmt_tick(b, sizeof(b), v);
		fprintf(fp, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>"
			    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
			x, x, MT, H - MB, x, H - MB + 16, b);
	}
}

int svg_lines(const char *file, const char *title, const char *xlabel, const char *ylabel,
	      const struct svg_series *s, int ns, bool logx)
{
	double xlo, xhi, ymax = 0;
	const char *names[16];
	FILE *fp = begin(file, title);

	if (!fp)
		return -1;
	x_range(s, ns, logx, &xlo, &xhi);
	for (int i = 0; i < ns; i++)
		for (size_t k = 0; k < s[i].n; k++)
			ymax = s[i].y[k] > ymax ? s[i].y[k] : ymax;
	ymax = ymax > 0 ? ymax * 1.05 : 1;
	y_ticks(fp, ymax);
	x_ticks(fp, xlo, xhi, logx);
	for (int i = 0; i < ns && i < 16; i++) {
		names[i] = s[i].name;
		fprintf(fp, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"",
			colours[i % NCOLOURS]);
		for (size_t k = 0; k < s[i].n; k++) {
			double xv = s[i].x[k], fx;

			if (logx && xv <= 0)
				continue;
			fx = logx ? (log10(xv) - log10(xlo)) / (log10(xhi) - log10(xlo)) : (xv - xlo) / (xhi - xlo);
			fprintf(fp, "%.1f,%.1f ", ML + fx * (W - ML - MR), H - MB - s[i].y[k] / ymax * (H - MT - MB));
		}
		fprintf(fp, "\"/>\n");
	}
	legend(fp, names, ns < 16 ? ns : 16);
	axis_labels(fp, xlabel, ylabel);
	return end(fp, file);
}

int svg_bars(const char *file, const char *title, const char *ylabel, const char *const *groups, int ng,
	     const char *const *bars, int nb, const double *vals)
{
	double ymax = 0, gw = (double)(W - ML - MR) / ng, bw = gw * 0.8 / nb;
	FILE *fp = begin(file, title);

	if (!fp)
		return -1;
	for (int i = 0; i < ng * nb; i++)
		ymax = !isnan(vals[i]) && vals[i] > ymax ? vals[i] : ymax;
	ymax = ymax > 0 ? ymax * 1.08 : 1;
	y_ticks(fp, ymax);
	for (int g = 0; g < ng; g++) {
		double gx = ML + g * gw + gw * 0.1;

		for (int b = 0; b < nb; b++) {
			double v = vals[g * nb + b], h;

			if (isnan(v))
				continue;
			h = v / ymax * (H - MT - MB);
			fprintf(fp, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
				gx + b * bw, H - MB - h, bw * 0.92, h, colours[b % NCOLOURS]);
			esc(fp, bars[b]);
			fprintf(fp, ": %.1f</title></rect>\n", v);
		}
		fprintf(fp, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", ML + g * gw + gw / 2, H - MB + 16);
		esc(fp, groups[g]);
		fprintf(fp, "</text>\n");
	}
	legend(fp, bars, nb);
	axis_labels(fp, "", ylabel);
	return end(fp, file);
}
