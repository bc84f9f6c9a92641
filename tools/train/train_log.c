/* train_log.c: what cdp-train writes about a run (rank 0 only, except the
 * per-rank key log of the test mode).
 *
 *  RUNDIR/metrics.jsonl  one JSON object a line:
 *    {"type":"step","step":S,"epoch":E,"loss":L,"lr":X,"samples_per_s":R,
 *     "data_wait_s":W,"allreduce_s":A,"grad_allreduce_s":G,
 *     "grad_exposed_s":E,"loss_scale":X,"skipped_steps":N,
 *     "rss_anon_kb":[per rank],"skipped":K}
 *      averages over the steps since the last step line; data_wait_s,
 *      allreduce_s, grad_allreduce_s (gradient buckets in flight) and
 *      grad_exposed_s (the part of it not hidden behind backward,
 *      <= grad_allreduce_s on every rank: dist.h, cdp_dist_stats) are the
 *      slowest rank's totals over them; loss_scale is
 *      the dynamic loss scale after the step (null when off), skipped_steps
 *      the optimizer steps skipped so far because the scaled gradients
 *      overflowed, skipped the bad records skipped so far;
 *    {"type":"val","step":S,"epoch":E,"loss":L,"accuracy":X,"miou":X,
 *     "iou":[per class],"f1":[per class]}
 *    {"type":"epoch","step":S,"epoch":E,"loss":L,"seconds":T[,"val_loss":..,
 *     "val_accuracy":..,"val_miou":..]}
 *    Undefined metrics are null. Resuming keeps the lines up to the
 *    checkpoint's step and drops later ones, so the file stays one curve.
 *  RUNDIR/train.log (or --log FILE)  timestamped text lines, appended.
 *  RUNDIR/loss.png  the training loss (top, blue) and validation mIoU or
 *    accuracy (bottom, red, 0..1) against the step, redrawn each epoch.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_png.h"
#include "cdp_progress.h"
#include "dist/dist.h"
#include "train_int.h"
#include "train_trace.h"

long tr_rss_anon_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int curve_add(tr_curve *c, double step, double value)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 256;
		tr_point *p = realloc(c->p, nc * sizeof *p);
		if (!p)
			return -1;
		c->p = p;
		c->cap = nc;
	}
	c->p[c->n].step = step;
	c->p[c->n++].value = value;
	return 0;
}

/* Keeps the lines of an earlier run up to `upto` and reloads its curves. */
static int trim_jsonl(trainer *t, const char *path, long upto, char *err, size_t cap)
{
	char tmp[4200], line[65536];
	FILE *in = fopen(path, "r"), *out;

	if (!in)
		return 0;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if (!(out = fopen(tmp, "w"))) {
		snprintf(err, cap, "cannot create '%s': %s", tmp, strerror(errno));
		fclose(in);
		return -1;
	}
	while (fgets(line, sizeof line, in)) {
		char type[16];
		double step, loss;
		const char *m;
		if (sscanf(line, "{\"type\":\"%15[a-z]\",\"step\":%lf", type, &step) != 2 ||
		    step > upto)
			continue;
		fputs(line, out);
		if (!strcmp(type, "step") && (m = strstr(line, "\"loss\":")) &&
		    sscanf(m + 7, "%lf", &loss) == 1)
			curve_add(&t->loss_curve, step, loss);
		if (!strcmp(type, "val") && (m = strstr(line, "\"metric\":")) &&
		    sscanf(m + 9, "%lf", &loss) == 1)
			curve_add(&t->val_curve, step, loss);
		/* --keep-best: best.cdpt's value, so a resume keeps a better one */
		if (!strcmp(type, "val") && t->o->keep_best) {
			const char *key = t->o->keep_best == CDP_BEST_MIOU ? "\"miou\":" :
			                  t->o->keep_best == CDP_BEST_LOSS ? "\"loss\":" : "\"accuracy\":";
			int lower = t->o->keep_best == CDP_BEST_LOSS;
			double x;
			if ((m = strstr(line, key)) && sscanf(m + strlen(key), "%lf", &x) == 1 &&
			    isfinite(x) && (!t->have_best || (lower ? x < t->best : x > t->best))) {
				t->best = x;
				t->have_best = 1;
			}
		}
	}
	fclose(in);
	if (fclose(out) != 0 || rename(tmp, path) != 0) {
		snprintf(err, cap, "cannot write '%s': %s", path, strerror(errno));
		remove(tmp);
		return -1;
	}
	return 0;
}

/* No file the run writes (the log, metrics.jsonl, loss.png, the
 * checkpoint) may be one it reads: the pool's files, the pointer files,
 * the model cfg. By inode (cdp_file.h), so "--log model.cfg" or a link
 * into the pool is refused before anything is appended to it. */
static int check_outputs(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	const char *in[5] = { "data.mdb", "lock.mdb", o->keys, o->val_keys, o->model };
	static const char *const role[5] = { "a file of the pool", "a file of the pool",
	                                     "the --keys file", "the --val-keys file",
	                                     "the --model cfg" };
	static const char *const outs[5] = { "train.log", "metrics.jsonl", "loss.png",
	                                     "checkpoint.cdpt", "best.cdpt" };
	char path[4200], what[4400];
	cdp_fileset set = { 0 };
	const char *hit = NULL;
	int rc = 0;

	for (int i = 0; i < 5 && rc == 0; i++) {
		if (!in[i])
			continue;
		if (i < 2)
			snprintf(path, sizeof path, "%s/%s", o->db, in[i]);
		else
			snprintf(path, sizeof path, "%s", in[i]);
		snprintf(what, sizeof what, "%s '%s'", role[i], path);
		rc = cdp_fileset_add(&set, path, what);
	}
	for (int i = 0; i < 5 && rc == 0 && !hit; i++) {
		if (i == 0 && o->log_path)
			snprintf(path, sizeof path, "%s", o->log_path);
		else
			snprintf(path, sizeof path, "%s/%s", o->out, outs[i]);
		hit = cdp_fileset_find(&set, path);
	}
	if (rc)
		snprintf(err, cap, "cannot examine the input files: %s", cdp_strerror(rc));
	else if (hit)
		snprintf(err, cap, "refusing to write '%s': it is %s", path, hit);
	cdp_fileset_free(&set);
	return rc || hit ? -1 : 0;
}

int tr_log_open(trainer *t, char *err, size_t cap)
{
	char path[4200];

	if (check_outputs(t, err, cap) < 0)
		return -1;

	snprintf(path, sizeof path, "%s/metrics.jsonl", t->o->out);
	if (t->have_ck && trim_jsonl(t, path, (long)t->ck.step, err, cap) < 0)
		return -1;
	if (!(t->jsonl = fopen(path, t->have_ck ? "a" : "w"))) {
		snprintf(err, cap, "cannot create '%s': %s", path, strerror(errno));
		return -1;
	}
	if (t->o->log_path)
		snprintf(path, sizeof path, "%s", t->o->log_path);
	else
		snprintf(path, sizeof path, "%s/train.log", t->o->out);
	if (!(t->log = fopen(path, "a"))) {
		snprintf(err, cap, "cannot create '%s': %s", path, strerror(errno));
		return -1;
	}
	snprintf(t->png_path, sizeof t->png_path, "%s/loss.png", t->o->out);
	return 0;
}

void tr_log_close(trainer *t)
{
	if (t->jsonl && fclose(t->jsonl) != 0)
		fprintf(stderr, "cdp-train: cannot write '%s/metrics.jsonl': %s\n", t->o->out,
		        strerror(errno));
	if (t->log)
		fclose(t->log);
	t->jsonl = t->log = NULL;
	free(t->loss_curve.p);
	free(t->val_curve.p);
}

void tr_logf(trainer *t, const char *fmt, ...)
{
	va_list ap;
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;

	if (!t->log)
		return;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(t->log, "%s ", ts);
	va_start(ap, fmt);
	vfprintf(t->log, fmt, ap);
	va_end(ap);
	fputc('\n', t->log);
	fflush(t->log);
}

/* A JSON number, or null when not finite. */
static void jnum(FILE *f, const char *key, double v)
{
	if (isfinite(v))
		fprintf(f, ",\"%s\":%.17g", key, v);
	else
		fprintf(f, ",\"%s\":null", key);
}

void tr_log_step(trainer *t, double lr)
{
	int j = t->size;
	double *v = calloc((size_t)5 * j, sizeof *v);
	cdp_dist_stats ds;
	double dt = cdp_now() - t->iv_t0, wait = 0, comm = 0, grad = 0, exposed = 0, loss;

	if (!v)
		TR_FAIL("out of memory");
	cdp_dist_stats_get(&ds);
	v[t->rank] = (double)tr_rss_anon_kb();
	v[j + t->rank] = t->iv_wait;
	v[2 * j + t->rank] = ds.wait_s + ds.progress_s;
	v[3 * j + t->rank] = ds.grad_s;
	v[4 * j + t->rank] = ds.grad_exposed_s;
	cdp_dist_sum_f64(v, (size_t)5 * j);
	for (int r = 0; r < j; r++) {
		wait = fmax(wait, v[j + r]);
		comm = fmax(comm, v[2 * j + r]);
		grad = fmax(grad, v[3 * j + r]);
		exposed = fmax(exposed, v[4 * j + r]);
	}
	loss = t->iv_loss / t->iv_steps;
	if (t->jsonl) {
		FILE *f = t->jsonl;
		fprintf(f, "{\"type\":\"step\",\"step\":%ld,\"epoch\":%" PRIu64, t->step,
		        t->estep == 0 ? t->epoch - 1 : t->epoch);
		jnum(f, "loss", loss);
		jnum(f, "lr", lr);
		jnum(f, "samples_per_s",
		     dt > 0 ? t->iv_steps * (double)t->accumulate * t->o->batch * j / dt : NAN);
		jnum(f, "data_wait_s", wait);
		jnum(f, "allreduce_s", comm);
		jnum(f, "grad_allreduce_s", grad);
		jnum(f, "grad_exposed_s", exposed);
		jnum(f, "loss_scale", t->scale > 0 ? t->scale : NAN);
		fprintf(f, ",\"skipped_steps\":%" PRIu64, t->scale_skipped);
		fprintf(f, ",\"rss_anon_kb\":[");
		for (int r = 0; r < j; r++)
			fprintf(f, "%s%.0f", r ? "," : "", v[r]);
		fprintf(f, "],\"skipped\":%" PRIu64 "}\n", t->skipped);
		fflush(f);
		tr_logf(t, "step %ld loss %.6f lr %.6g %.1f samples/s wait %.3f s all-reduce %.3f s",
		        t->step, loss, lr,
		        dt > 0 ? t->iv_steps * (double)t->accumulate * t->o->batch * j / dt : 0,
		        wait, comm);
		curve_add(&t->loss_curve, (double)t->step, loss);
	}
	free(v);
	t->iv_loss = 0;
	t->iv_steps = 0;
	t->iv_wait = 0;
	/* --trace: the spans so far to rank 0, at this collective point */
	tr_trace_flush(t);
	t->iv_t0 = cdp_now();
	cdp_dist_stats_reset();
}

/* The headline metric: road IoU for two classes, mean IoU otherwise, or
 * accuracy for classifiers. */
static double headline(const trainer *t, const tr_val *v)
{
	const uint64_t *c = v->conf.counts;
	int k = v->conf.k;
	if (t->hw == 1)
		return cdp_metrics_accuracy(c, k);
	return k == 2 ? cdp_metrics_iou(c, k, 1) : cdp_metrics_miou(c, k, NULL);
}

void tr_log_val(trainer *t, const tr_val *v)
{
	FILE *f = t->jsonl;
	int k = v->conf.k;
	char line[512];

	if (!f || !v->done)
		return;
	fprintf(f, "{\"type\":\"val\",\"step\":%ld,\"epoch\":%" PRIu64, t->step,
	        t->estep == 0 ? t->epoch - 1 : t->epoch);
	jnum(f, "loss", v->loss);
	jnum(f, "metric", headline(t, v));
	jnum(f, "accuracy", cdp_metrics_accuracy(v->conf.counts, k));
	jnum(f, "miou", cdp_metrics_miou(v->conf.counts, k, NULL));
	fprintf(f, ",\"iou\":[");
	for (int c = 0; c < k; c++) {
		double x = cdp_metrics_iou(v->conf.counts, k, c);
		isfinite(x) ? fprintf(f, "%s%.17g", c ? "," : "", x) : fprintf(f, "%snull", c ? "," : "");
	}
	fprintf(f, "],\"f1\":[");
	for (int c = 0; c < k; c++) {
		cdp_prf p;
		cdp_metrics_prf(v->conf.counts, k, c, &p);
		isfinite(p.f1) ? fprintf(f, "%s%.17g", c ? "," : "", p.f1)
		               : fprintf(f, "%snull", c ? "," : "");
	}
	fprintf(f, "]}\n");
	fflush(f);
	cdp_metrics_format(v->conf.counts, k, line, sizeof line);
	tr_logf(t, "validation at step %ld: loss %.6f %s", t->step, v->loss, line);
	curve_add(&t->val_curve, (double)t->step, headline(t, v));
}

void tr_log_epoch(trainer *t, const tr_val *v)
{
	FILE *f = t->jsonl;

	if (!f)
		return;
	fprintf(f, "{\"type\":\"epoch\",\"step\":%ld,\"epoch\":%" PRIu64, t->step, t->epoch - 1);
	jnum(f, "loss", t->ep_steps ? t->ep_loss / t->ep_steps : NAN);
	jnum(f, "seconds", cdp_now() - t->t_start);
	if (v && v->done) {
		jnum(f, "val_loss", v->loss);
		jnum(f, "val_accuracy", cdp_metrics_accuracy(v->conf.counts, v->conf.k));
		jnum(f, "val_miou", cdp_metrics_miou(v->conf.counts, v->conf.k, NULL));
	}
	fprintf(f, "}\n");
	fflush(f);
	tr_logf(t, "epoch %" PRIu64 " done at step %ld: mean loss %.6f", t->epoch - 1, t->step,
	        t->ep_steps ? t->ep_loss / t->ep_steps : NAN);
}

enum { PW = 800, PH = 500, PM = 40 };

static void px(uint8_t *img, int x, int y, const uint8_t rgb[3])
{
	if (x < 0 || y < 0 || x >= PW || y >= PH)
		return;
	memcpy(img + ((size_t)y * PW + x) * 3, rgb, 3);
}

static void line(uint8_t *img, int x0, int y0, int x1, int y1, const uint8_t rgb[3])
{
	int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
	int e = dx + dy;
	for (;;) {
		px(img, x0, y0, rgb);
		if (x0 == x1 && y0 == y1)
			break;
		int e2 = 2 * e;
		if (e2 >= dy) { e += dy; x0 += sx; }
		if (e2 <= dx) { e += dx; y0 += sy; }
	}
}

/* One panel: box, horizontal grid in quarters, the curve scaled to
 * [lo, hi] over steps [0, smax]. */
static void panel(uint8_t *img, int top, int h, const tr_curve *c, double lo, double hi,
                  double smax, const uint8_t rgb[3])
{
	static const uint8_t frame[3] = { 0, 0, 0 }, grid[3] = { 220, 220, 220 };
	int x0 = PM, x1 = PW - PM / 2, y0 = top, y1 = top + h;

	for (int q = 1; q < 4; q++)
		line(img, x0, y0 + q * h / 4, x1, y0 + q * h / 4, grid);
	line(img, x0, y0, x1, y0, frame);
	line(img, x0, y1, x1, y1, frame);
	line(img, x0, y0, x0, y1, frame);
	line(img, x1, y0, x1, y1, frame);
	if (hi <= lo)
		hi = lo + 1;
	for (size_t i = 0; i < c->n; i++) {
		double v = c->p[i].value;
		if (!isfinite(v))
			continue;
		int x = x0 + (int)((x1 - x0) * c->p[i].step / smax);
		int y = y1 - (int)((y1 - y0) * (v - lo) / (hi - lo));
		if (i > 0 && isfinite(c->p[i - 1].value)) {
			int px0 = x0 + (int)((x1 - x0) * c->p[i - 1].step / smax);
			int py0 = y1 - (int)((y1 - y0) * (c->p[i - 1].value - lo) / (hi - lo));
			line(img, px0, py0, x, y, rgb);
		} else {
			line(img, x - 1, y, x + 1, y, rgb);
		}
	}
}

void tr_plot(trainer *t)
{
	static const uint8_t blue[3] = { 30, 90, 200 }, red[3] = { 200, 40, 40 };
	uint8_t *img;
	double hi = 0, smax = t->total > 0 ? (double)t->total : 1;
	int rc;

	if (t->rank != 0 || !t->jsonl)
		return;
	if (!(img = malloc((size_t)PW * PH * 3)))
		return;
	memset(img, 255, (size_t)PW * PH * 3);
	for (size_t i = 0; i < t->loss_curve.n; i++)
		if (isfinite(t->loss_curve.p[i].value) && t->loss_curve.p[i].value > hi)
			hi = t->loss_curve.p[i].value;
	panel(img, PM / 2, (PH - 2 * PM) * 2 / 3, &t->loss_curve, 0, hi * 1.05, smax, blue);
	panel(img, PM + (PH - 2 * PM) * 2 / 3, (PH - 2 * PM) / 3, &t->val_curve, 0, 1, smax, red);
	if ((rc = cdp_png_write(t->png_path, img, PW, PH, 3, 8)) != 0)
		tr_logf(t, "cannot write '%s': %s", t->png_path, cdp_strerror(rc));
	free(img);
}

void tr_log_keys(trainer *t, const cdp_batch *b)
{
	for (int i = 0; i < b->n; i++)
		fprintf(t->keylog, "%" PRIu64 " %" PRIu64 " %s\n", b->epoch, b->step,
		        cdp_loader_key(t->tl, b->index[i]));
}
