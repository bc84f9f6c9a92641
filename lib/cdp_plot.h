/* cdp_plot.h: the plots the tools write, drawn with cairo (text in a real
 * font, anti-aliased lines) and written through cdp_png_write (so a
 * failure leaves no half-written file).
 *
 * Errors: CDP_OK, CDP_EINVAL (bad arguments), CDP_ERANGE (a confusion
 * matrix of more classes than CDP_PLOT_CLASSES_MAX), CDP_ENOMEM (cairo
 * could not draw), or cdp_png_write's errno (ENOENT, ENOSPC, ...).
 */
#ifndef CDP_PLOT_H
#define CDP_PLOT_H

#include <stddef.h>
#include <stdint.h>

/* n points (x[i], y[i]); non-finite y are gaps */
typedef struct cdp_plot_xy {
	const double *x, *y;
	size_t n;
} cdp_plot_xy;

/* A training run against its step, CDP_PLOT_WIDTH x CDP_PLOT_HEIGHT pixels: the
 * title on top; the main panel with the training loss (raw, light blue,
 * and an exponential moving average, dark blue) and the validation loss
 * (orange dots) on the left axis, the validation metric (green dots, 0..1)
 * on the right axis, and the legend in its top right corner; below it a
 * small panel of the learning rate (purple); dashed grey lines at the
 * steps where a resumed run started, in both panels. */
#define CDP_PLOT_WIDTH 960
#define CDP_PLOT_HEIGHT 600
typedef struct cdp_plot_run {
	const char *title;
	cdp_plot_xy loss, val_loss, metric, lr;
	const char *metric_name;      /* e.g. "validation road IoU" */
	const double *resume;         /* [n_resume] steps */
	size_t n_resume;
	double xmax;                  /* the run's last step; 0: the data's */
} cdp_plot_run;

int cdp_plot_run_png(const char *path, const cdp_plot_run *r);

/* The confusion matrix counts (k, k), row = reference class, column =
 * predicted class, as a grid of cells shaded by the row's fraction, each
 * with its count; names[k] label the rows and columns. */
#define CDP_PLOT_CLASSES_MAX 64
int cdp_plot_confusion_png(const char *path, const uint64_t *counts, int k,
                           const char *const *names, const char *title);

/* A 2-D histogram, CDP_PLOT_HIST_WIDTH x CDP_PLOT_HIST_HEIGHT pixels:
 * counts (nb, nb), row i = y bin, column j = x bin, both axes binned over
 * [lo, hi] (x grows right, y up), each cell shaded white to dark blue by
 * log(1 + count) over log(1 + the largest count), empty cells white; the
 * diagonal y = x dashed, the axes ticked and labelled xlabel and ylabel,
 * a colour bar of the counts on the right, the title on top. */
#define CDP_PLOT_HIST_WIDTH 760
#define CDP_PLOT_HIST_HEIGHT 660
int cdp_plot_hist2d_png(const char *path, const uint64_t *counts, int nb, double lo,
                        double hi, const char *xlabel, const char *ylabel, const char *title);

#endif
