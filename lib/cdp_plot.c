/* cdp_plot.c: the run plot, the confusion matrix and the 2-D histogram
 * (cdp_plot.h) with
 * cairo. Text uses cairo's "toy" font API with the "sans-serif" face,
 * which fontconfig resolves to an installed font (DejaVu Sans on Debian):
 * labels are short and Latin, so no text layout library is needed.
 * The picture is drawn on an RGB24 image surface and handed to
 * cdp_png_write, which writes it under a temporary name and renames it.
 */
#include "cdp_plot.h"

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "cdp_png.h"

typedef struct col3 { double r, g, b; } col3;

static const col3 c_raw = { 0.62, 0.75, 0.92 }, c_smooth = { 0.10, 0.33, 0.75 },
                 c_val = { 0.90, 0.45, 0.05 }, c_metric = { 0.15, 0.62, 0.22 },
                 c_lr = { 0.50, 0.22, 0.65 }, c_resume = { 0.45, 0.45, 0.45 },
                 c_text = { 0.1, 0.1, 0.1 }, c_grid = { 0.88, 0.88, 0.88 };

/* A panel: its pixel box and its data ranges. */
typedef struct panel {
	double x0, y0, x1, y1;      /* pixels, y0 on top */
	double xlo, xhi, ylo, yhi;
} panel;

static double px_x(const panel *p, double x)
{
	return p->x0 + (p->x1 - p->x0) * (x - p->xlo) / (p->xhi - p->xlo);
}

static double px_y(const panel *p, double y, double lo, double hi)
{
	return p->y1 - (p->y1 - p->y0) * (y - lo) / (hi - lo);
}

static void color(cairo_t *cr, col3 c)
{
	cairo_set_source_rgb(cr, c.r, c.g, c.b);
}

/* align: 0 left, 0.5 centre, 1 right of x; baseline centred on y */
static void text(cairo_t *cr, double x, double y, double align, const char *s)
{
	cairo_text_extents_t e;
	cairo_text_extents(cr, s, &e);
	cairo_move_to(cr, x - align * e.x_advance, y - e.y_bearing - e.height / 2);
	cairo_show_text(cr, s);
}

/* s at (x, y), rotated by angle (radians; -pi/2 reads bottom to top)
 * and aligned as text() does, along its own baseline */
static void rtext(cairo_t *cr, double x, double y, double angle, double align, const char *s)
{
	cairo_save(cr);
	cairo_translate(cr, x, y);
	cairo_rotate(cr, angle);
	text(cr, 0, 0, align, s);
	cairo_restore(cr);
}

/* A tick spacing of 1, 2 or 5 times a power of ten giving about n ticks. */
static double nice_step(double range, int n)
{
	double raw = range / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
	return mag * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

static void range_of(const cdp_plot_xy *s, double *lo, double *hi)
{
	for (size_t i = 0; i < s->n; i++)
		if (isfinite(s->y[i])) {
			*lo = fmin(*lo, s->y[i]);
			*hi = fmax(*hi, s->y[i]);
		}
}

/* At most this many ticks an axis: a step below half an ulp of the values
 * (data a few ulps apart) would otherwise never advance a tick loop. */
#define MAX_TICKS 64

/* Widens [lo, hi] to whole ticks; returns the tick step. A range too narrow
 * for ticks of its own (equal values, or a few ulps apart) is widened as a
 * single value is. */
static double nice_range(double *lo, double *hi, int n)
{
	if (!(*hi - *lo > 1e-9 * fmax(fabs(*lo), fabs(*hi)))) {
		double d = isfinite(*lo) && *lo != 0 ? fabs(*lo) * 0.1 : 1;
		*lo = isfinite(*lo) ? *lo - d : 0;
		*hi = isfinite(*hi) ? *hi + d : 1;
	}
	double st = nice_step(*hi - *lo, n);
	*lo = floor(*lo / st) * st;
	*hi = ceil(*hi / st) * st;
	return st;
}

/* The frame, horizontal grid and y tick labels on the left (side 0) or
 * right (side 1) for [lo, hi] in steps st. */
static void y_axis(cairo_t *cr, const panel *p, double lo, double hi, double st, int side)
{
	char buf[32];
	cairo_set_font_size(cr, 11);
	for (int k = 0; k < MAX_TICKS && lo + k * st <= hi + st * 1e-6; k++) {
		double v = lo + k * st, y = px_y(p, v, lo, hi);
		if (side == 0) {
			color(cr, c_grid);
			cairo_move_to(cr, p->x0, y);
			cairo_line_to(cr, p->x1, y);
			cairo_stroke(cr);
		}
		color(cr, c_text);
		cairo_move_to(cr, side ? p->x1 : p->x0 - 4, y);
		cairo_line_to(cr, side ? p->x1 + 4 : p->x0, y);
		cairo_stroke(cr);
		snprintf(buf, sizeof buf, "%.3g", fabs(v) < st * 1e-6 ? 0.0 : v);
		text(cr, side ? p->x1 + 7 : p->x0 - 7, y, side ? 0 : 1, buf);
	}
}

static void x_axis(cairo_t *cr, const panel *p, int labels)
{
	char buf[32];
	double st = nice_step(p->xhi - p->xlo, 8);
	cairo_set_font_size(cr, 11);
	double first = ceil(p->xlo / st) * st;

	for (int k = 0; k < MAX_TICKS && first + k * st <= p->xhi + st * 1e-6; k++) {
		double v = first + k * st, x = px_x(p, v);
		color(cr, c_grid);
		cairo_move_to(cr, x, p->y0);
		cairo_line_to(cr, x, p->y1);
		cairo_stroke(cr);
		color(cr, c_text);
		cairo_move_to(cr, x, p->y1);
		cairo_line_to(cr, x, p->y1 + 4);
		cairo_stroke(cr);
		if (labels) {
			snprintf(buf, sizeof buf, "%g", fabs(v) < st * 1e-6 ? 0.0 : v);
			text(cr, x, p->y1 + 12, 0.5, buf);
		}
	}
}

static void frame(cairo_t *cr, const panel *p)
{
	color(cr, c_text);
	cairo_rectangle(cr, p->x0, p->y0, p->x1 - p->x0, p->y1 - p->y0);
	cairo_stroke(cr);
}

static void curve(cairo_t *cr, const panel *p, const cdp_plot_xy *s, double lo, double hi,
                  col3 c, double width)
{
	int pen = 0;
	color(cr, c);
	cairo_set_line_width(cr, width);
	for (size_t i = 0; i < s->n; i++) {
		if (!isfinite(s->y[i])) {
			pen = 0;
			continue;
		}
		double x = px_x(p, s->x[i]), y = px_y(p, s->y[i], lo, hi);
		pen ? cairo_line_to(cr, x, y) : cairo_move_to(cr, x, y);
		pen = 1;
	}
	cairo_stroke(cr);
	cairo_set_line_width(cr, 1);
}

static void dots(cairo_t *cr, const panel *p, const cdp_plot_xy *s, double lo, double hi,
                 col3 c)
{
	curve(cr, p, s, lo, hi, c, 1.2);
	color(cr, c);
	for (size_t i = 0; i < s->n; i++)
		if (isfinite(s->y[i])) {
			cairo_arc(cr, px_x(p, s->x[i]), px_y(p, s->y[i], lo, hi), 3.5, 0, 2 * M_PI);
			cairo_fill(cr);
		}
}

static void resumes(cairo_t *cr, const panel *p, const cdp_plot_run *r, int label)
{
	static const double dash[2] = { 5, 4 };
	color(cr, c_resume);
	cairo_set_dash(cr, dash, 2, 0);
	cairo_set_line_width(cr, 1.5);
	for (size_t i = 0; i < r->n_resume; i++) {
		double x = px_x(p, r->resume[i]);
		cairo_move_to(cr, x, p->y0);
		cairo_line_to(cr, x, p->y1);
		cairo_stroke(cr);
		if (label) {
			cairo_set_font_size(cr, 10);
			text(cr, x + 3, p->y0 + 8, 0, "resume");
		}
	}
	cairo_set_dash(cr, NULL, 0, 0);
	cairo_set_line_width(cr, 1);
}

/* The debiased exponential moving average of s into y (n), with a weight
 * growing with the number of points: 0 (none) up to 10 points, 0.95 from
 * 200, so short runs stay readable and long ones lose their noise. */
static void smooth(const cdp_plot_xy *s, double *y)
{
	double w = s->n > 10 ? fmin(0.95, 1 - 10.0 / (double)s->n) : 0, m = 0, z = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (isfinite(s->y[i])) {
			m = w * m + (1 - w) * s->y[i];
			z = w * z + (1 - w);
		}
		y[i] = z > 0 ? m / z : NAN;
	}
}

static void legend(cairo_t *cr, const panel *p, const char *const *label, const col3 *c,
                   const int *kind, int n)
{
	double wmax = 0, lh = 17, x, y;
	cairo_text_extents_t e;

	cairo_set_font_size(cr, 12);
	for (int i = 0; i < n; i++) {
		cairo_text_extents(cr, label[i], &e);
		wmax = fmax(wmax, e.x_advance);
	}
	x = p->x1 - wmax - 48;
	y = p->y0 + 8;
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_rectangle(cr, x, y, wmax + 40, n * lh + 8);
	cairo_fill_preserve(cr);
	color(cr, c_grid);
	cairo_stroke(cr);
	for (int i = 0; i < n; i++) {
		double ly = y + 4 + lh * (i + 0.5);
		color(cr, c[i]);
		if (kind[i] == 2) {
			static const double dash[2] = { 5, 4 };
			cairo_set_dash(cr, dash, 2, 0);
		}
		cairo_set_line_width(cr, kind[i] == 0 ? 1 : 2);
		cairo_move_to(cr, x + 6, ly);
		cairo_line_to(cr, x + 28, ly);
		cairo_stroke(cr);
		cairo_set_dash(cr, NULL, 0, 0);
		cairo_set_line_width(cr, 1);
		if (kind[i] == 1) {
			cairo_arc(cr, x + 17, ly, 3.5, 0, 2 * M_PI);
			cairo_fill(cr);
		}
		color(cr, c_text);
		text(cr, x + 34, ly, 0, label[i]);
	}
}

/* The surface's pixels (RGB24: 0x00RRGGBB words) written as an RGB PNG. */
static int write_png(cairo_surface_t *s, const char *path)
{
	int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
	int stride = cairo_image_surface_get_stride(s), rc;
	const unsigned char *d;
	uint8_t *rgb;

	cairo_surface_flush(s);
	if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS)
		return CDP_ENOMEM;
	if (!(rgb = malloc((size_t)w * h * 3)))
		return CDP_ENOMEM;
	d = cairo_image_surface_get_data(s);
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			uint32_t v;
			memcpy(&v, d + (size_t)y * stride + 4 * (size_t)x, 4);
			rgb[((size_t)y * w + x) * 3] = (uint8_t)(v >> 16);
			rgb[((size_t)y * w + x) * 3 + 1] = (uint8_t)(v >> 8);
			rgb[((size_t)y * w + x) * 3 + 2] = (uint8_t)v;
		}
	rc = cdp_png_write(path, rgb, w, h, 3, 8);
	free(rgb);
	return rc;
}

static cairo_t *canvas(int w, int h, cairo_surface_t **s)
{
	cairo_t *cr;
	*s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
	cr = cairo_create(*s);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_line_width(cr, 1);
	return cr;
}

static void finish(cairo_t *cr, cairo_surface_t *s)
{
	cairo_destroy(cr);
	cairo_surface_destroy(s);
}

int cdp_plot_run_png(const char *path, const cdp_plot_run *r)
{
	cairo_surface_t *s;
	cairo_t *cr;
	double *sm, llo = INFINITY, lhi = -INFINITY, rlo = INFINITY, rhi = -INFINITY, xmax = r->xmax;
	double lst, rst;
	panel m = { 78, 48, CDP_PLOT_WIDTH - 70, 410, 0, 1, 0, 1 };
	panel l = { 78, 440, CDP_PLOT_WIDTH - 70, 540, 0, 1, 0, 1 };
	const char *lab[5];
	col3 col[5];
	int kind[5], n = 0, rc;

	if (!path || !r)
		return CDP_EINVAL;
	const cdp_plot_xy *all[4] = { &r->loss, &r->val_loss, &r->metric, &r->lr };
	for (int i = 0; i < 4; i++)
		for (size_t j = 0; j < all[i]->n; j++)
			xmax = fmax(xmax, all[i]->x[j]);
	if (!(sm = malloc((r->loss.n + 1) * sizeof *sm)))
		return CDP_ENOMEM;
	smooth(&r->loss, sm);
	m.xhi = l.xhi = xmax > 0 ? xmax : 1;
	range_of(&r->loss, &llo, &lhi);
	range_of(&r->val_loss, &llo, &lhi);
	range_of(&r->lr, &rlo, &rhi);
	lst = nice_range(&llo, &lhi, 6);
	rlo = fmin(rlo, 0);
	rst = nice_range(&rlo, &rhi, 2);

	cr = canvas(CDP_PLOT_WIDTH, CDP_PLOT_HEIGHT, &s);
	color(cr, c_text);
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
	cairo_set_font_size(cr, 16);
	text(cr, CDP_PLOT_WIDTH / 2.0, 22, 0.5, r->title ? r->title : "");
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);

	/* the main panel: losses left, the metric right on 0..1 */
	x_axis(cr, &m, 0);
	y_axis(cr, &m, llo, lhi, lst, 0);
	y_axis(cr, &m, 0, 1, 0.2, 1);
	resumes(cr, &m, r, 1);
	cdp_plot_xy smoothed = { r->loss.x, sm, r->loss.n };
	curve(cr, &m, &r->loss, llo, lhi, c_raw, 1);
	curve(cr, &m, &smoothed, llo, lhi, c_smooth, 2.2);
	dots(cr, &m, &r->val_loss, llo, lhi, c_val);
	dots(cr, &m, &r->metric, 0, 1, c_metric);
	frame(cr, &m);
	cairo_set_font_size(cr, 12);
	color(cr, c_text);
	rtext(cr, 20, (m.y0 + m.y1) / 2, -M_PI / 2, 0.5, "loss");
	rtext(cr, CDP_PLOT_WIDTH - 18, (m.y0 + m.y1) / 2, -M_PI / 2, 0.5,
	      r->metric_name ? r->metric_name : "validation metric");

	lab[n] = "training loss"; col[n] = c_raw; kind[n++] = 0;
	lab[n] = "training loss (smoothed)"; col[n] = c_smooth; kind[n++] = 3;
	lab[n] = "validation loss"; col[n] = c_val; kind[n++] = 1;
	lab[n] = r->metric_name ? r->metric_name : "validation metric"; col[n] = c_metric; kind[n++] = 1;
	if (r->n_resume) {
		lab[n] = "resumed"; col[n] = c_resume; kind[n++] = 2;
	}
	legend(cr, &m, lab, col, kind, n);

	/* the learning rate */
	x_axis(cr, &l, 1);
	y_axis(cr, &l, rlo, rhi, rst, 0);
	resumes(cr, &l, r, 0);
	curve(cr, &l, &r->lr, rlo, rhi, c_lr, 1.8);
	frame(cr, &l);
	cairo_set_font_size(cr, 12);
	color(cr, c_text);
	rtext(cr, 20, (l.y0 + l.y1) / 2, -M_PI / 2, 0.5, "learning rate");
	text(cr, (l.x0 + l.x1) / 2, CDP_PLOT_HEIGHT - 22, 0.5, "step");

	rc = write_png(s, path);
	finish(cr, s);
	free(sm);
	return rc;
}

/* A cell's shade: f in [0, 1], white to the smoothed dark blue. */
static void shade(cairo_t *cr, double f)
{
	cairo_set_source_rgb(cr, 1 - f * (1 - c_smooth.r), 1 - f * (1 - c_smooth.g),
	                     1 - f * (1 - c_smooth.b));
}

/* A plot's title, bold, centred on (x, y); the font is left normal. */
static void title_text(cairo_t *cr, double x, double y, const char *title)
{
	color(cr, c_text);
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
	cairo_set_font_size(cr, 15);
	text(cr, x, y, 0.5, title ? title : "");
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
}

int cdp_plot_confusion_png(const char *path, const uint64_t *counts, int k,
                           const char *const *names, const char *title)
{
	cairo_surface_t *s;
	cairo_t *cr;
	cairo_text_extents_t e;
	int cell, left = 150, top = 120, w, h, rc;
	char buf[32];

	if (!path || !counts || !names || k < 1)
		return CDP_EINVAL;
	if (k > CDP_PLOT_CLASSES_MAX)
		return CDP_ERANGE;
	cell = k <= 8 ? 80 : 640 / k;
	w = left + k * cell + 40;
	h = top + k * cell + 40;
	/* wide enough for the title, measured on a scratch surface */
	cr = canvas(1, 1, &s);
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
	cairo_set_font_size(cr, 15);
	cairo_text_extents(cr, title ? title : "", &e);
	finish(cr, s);
	if (e.x_advance + 40 > w && e.x_advance < 4000)
		w = (int)e.x_advance + 40;
	cr = canvas(w, h, &s);
	title_text(cr, w / 2.0, 20, title);
	cairo_set_font_size(cr, 12);
	text(cr, left + k * cell / 2.0, 48, 0.5, "predicted class");
	rtext(cr, 18, top + k * cell / 2.0, -M_PI / 2, 0.5, "reference class");
	cairo_set_font_size(cr, cell >= 40 ? 12 : 9);
	for (int i = 0; i < k; i++) {
		uint64_t row = 0;
		for (int j = 0; j < k; j++)
			row += counts[(size_t)i * k + j];
		color(cr, c_text);
		text(cr, left - 8, top + (i + 0.5) * cell, 1, names[i]);
		rtext(cr, left + (i + 0.5) * cell, top - 8, -M_PI / 4, 0, names[i]);
		for (int j = 0; j < k; j++) {
			uint64_t c = counts[(size_t)i * k + j];
			/* white to the smoothed dark blue by the row's fraction */
			double f = row ? (double)c / (double)row : 0;
			shade(cr, f);
			cairo_rectangle(cr, left + j * cell, top + i * cell, cell, cell);
			cairo_fill(cr);
			if (cell >= 24) {
				snprintf(buf, sizeof buf, "%llu", (unsigned long long)c);
				f > 0.5 ? cairo_set_source_rgb(cr, 1, 1, 1) : color(cr, c_text);
				text(cr, left + (j + 0.5) * cell, top + (i + 0.5) * cell, 0.5, buf);
			}
		}
	}
	color(cr, c_text);
	cairo_rectangle(cr, left, top, k * cell, k * cell);
	cairo_stroke(cr);
	rc = write_png(s, path);
	finish(cr, s);
	return rc;
}

int cdp_plot_hist2d_png(const char *path, const uint64_t *counts, int nb, double lo,
                        double hi, const char *xlabel, const char *ylabel, const char *title)
{
	cairo_surface_t *s;
	cairo_t *cr;
	panel p = { 96, 56, 96 + 540, 56 + 540, lo, hi, lo, hi };
	uint64_t max = 0;
	double cw, st, lmax, first;
	char buf[32];
	int rc;

	if (!path || !counts || nb < 1 || !(hi > lo) || !isfinite(lo) || !isfinite(hi))
		return CDP_EINVAL;
	for (size_t i = 0; i < (size_t)nb * nb; i++)
		max = counts[i] > max ? counts[i] : max;
	lmax = log1p((double)max);
	cw = (p.x1 - p.x0) / nb;
	cr = canvas(CDP_PLOT_HIST_WIDTH, CDP_PLOT_HIST_HEIGHT, &s);
	title_text(cr, CDP_PLOT_HIST_WIDTH / 2.0, 22, title);

	/* ticks: x below (with its grid), y on the left at the same step */
	x_axis(cr, &p, 1);
	st = nice_step(hi - lo, 8);
	first = ceil(lo / st) * st;
	cairo_set_font_size(cr, 11);
	for (int k = 0; k < MAX_TICKS && first + k * st <= hi + st * 1e-6; k++) {
		double v = first + k * st, y = px_y(&p, v, lo, hi);
		color(cr, c_grid);
		cairo_move_to(cr, p.x0, y);
		cairo_line_to(cr, p.x1, y);
		cairo_stroke(cr);
		color(cr, c_text);
		cairo_move_to(cr, p.x0 - 4, y);
		cairo_line_to(cr, p.x0, y);
		cairo_stroke(cr);
		snprintf(buf, sizeof buf, "%.4g", fabs(v) < st * 1e-6 ? 0.0 : v);
		text(cr, p.x0 - 7, y, 1, buf);
	}
	for (int i = 0; i < nb; i++)
		for (int j = 0; j < nb; j++) {
			uint64_t c = counts[(size_t)i * nb + j];
			if (!c)
				continue;
			shade(cr, lmax > 0 ? log1p((double)c) / lmax : 1);
			/* +0.5 px overlap: no hairline seams between cells */
			cairo_rectangle(cr, p.x0 + j * cw, p.y1 - (i + 1) * cw, cw + 0.5, cw + 0.5);
			cairo_fill(cr);
		}
	/* the diagonal y = x */
	color(cr, c_resume);
	cairo_set_dash(cr, (const double[]){ 5, 4 }, 2, 0);
	cairo_move_to(cr, p.x0, p.y1);
	cairo_line_to(cr, p.x1, p.y0);
	cairo_stroke(cr);
	cairo_set_dash(cr, NULL, 0, 0);
	frame(cr, &p);
	cairo_set_font_size(cr, 12);
	color(cr, c_text);
	text(cr, (p.x0 + p.x1) / 2, p.y1 + 36, 0.5, xlabel ? xlabel : "");
	rtext(cr, 22, (p.y0 + p.y1) / 2, -M_PI / 2, 0.5, ylabel ? ylabel : "");

	/* the colour bar: log counts from 1 to the largest */
	{
		double bx = p.x1 + 30, bw = 18, by0 = p.y0, by1 = p.y1;
		for (int k = 0; k < 100; k++) {
			shade(cr, (k + 0.5) / 100);
			cairo_rectangle(cr, bx, by1 - (k + 1) * (by1 - by0) / 100, bw,
			                (by1 - by0) / 100 + 0.5);
			cairo_fill(cr);
		}
		color(cr, c_text);
		cairo_rectangle(cr, bx, by0, bw, by1 - by0);
		cairo_stroke(cr);
		cairo_set_font_size(cr, 11);
		text(cr, bx + bw / 2, by1 + 12, 0.5, "1");
		snprintf(buf, sizeof buf, "%llu", (unsigned long long)max);
		text(cr, bx + bw / 2, by0 - 10, 0.5, buf);
		cairo_set_font_size(cr, 12);
		rtext(cr, bx + bw + 16, (by0 + by1) / 2, -M_PI / 2, 0.5, "pixels (log scale)");
	}
	rc = write_png(s, path);
	finish(cr, s);
	return rc;
}
