#!/usr/bin/env python3
"""plotcheck.py A.png B.png RESUME TOTAL: checks cdp-train's loss.png as an
image viewer shows it, read by GDAL (not by cdpool's own PNG reader).

A and B are plots of the same run under two names, the short one first.
The panels are found from their dark frame lines, not from cdpool's
layout constants. Checked: the size; a title, axis labels and tick values
(dark pixels above, left of, right of and below the panels); each series
in its colour in its panel (training loss raw and smoothed, validation
loss and metric in the main panel; the learning rate only in the lower
one); the legend's coloured swatches in the main panel's top right corner; a
dashed grey line at step RESUME of TOTAL in both panels. Text: A and B
agree outside the title band, differ inside it, and B's title is wider.
"""
import sys

import numpy as np
from osgeo import gdal

COLOURS = {  # lib/cdp_plot.c's colours, 0..255
    "raw": (158, 191, 235), "smoothed": (26, 84, 191), "val loss": (230, 115, 13),
    "metric": (38, 158, 56), "lr": (128, 56, 166), "resume": (115, 115, 115),
}


def load(path):
    ds = gdal.Open(path)
    if ds is None or ds.RasterCount != 3:
        sys.exit("plotcheck: %s is not an RGB image GDAL reads" % path)
    return np.moveaxis(ds.ReadAsArray(), 0, -1).astype(int)


def groups(idx):
    """consecutive runs of indices -> their first elements"""
    out = []
    for i in idx:
        if not out or i > out[-1][1] + 1:
            out.append([i, i])
        out[-1][1] = i
    return [g[0] for g in out]


def count(img, rgb, tol=30):
    return int((np.abs(img - np.array(rgb)).max(axis=2) <= tol).sum())


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    resume, total = float(sys.argv[3]), float(sys.argv[4])
    bad = []
    h, w, _ = a.shape
    if (w, h) != (960, 600) or a.shape != b.shape:
        sys.exit("plotcheck: %dx%d (and %s), want 960x600 both" % (w, h, b.shape))
    dark = a.sum(axis=2) < 500
    rows = groups(np.where(dark.mean(axis=1) > 0.6)[0])
    cols = groups(np.where(dark.mean(axis=0) > 0.6)[0])
    if len(rows) != 4 or len(cols) != 2:
        sys.exit("plotcheck: want two framed panels, found frame rows %s, columns %s"
                 % (rows, cols))
    (mt, mb, lt, lb), (x0, x1) = rows, cols
    if not (mb - mt > 2.5 * (lb - lt) and lt > mb):
        bad.append("the learning-rate panel is not a small panel below the main one")
    main_in = a[mt + 3:mb - 2, x0 + 3:x1 - 2]
    lr_in = a[lt + 3:lb - 2, x0 + 3:x1 - 2]
    for k in ("raw", "smoothed", "val loss", "metric"):
        if count(main_in, COLOURS[k]) < 20:
            bad.append("no %s curve in the main panel" % k)
    if count(main_in, COLOURS["lr"]) > 0:
        bad.append("the learning rate is drawn in the main panel")
    if count(lr_in, COLOURS["lr"]) < 50:
        bad.append("no learning rate in the lower panel")
    if count(lr_in, COLOURS["val loss"]) + count(lr_in, COLOURS["metric"]) > 0:
        bad.append("validation drawn in the learning-rate panel")
    legend = a[mt + 3:mt + 120, x1 - 330:x1 - 2]
    for k in ("raw", "smoothed", "val loss", "metric"):  # grey is also in the text's edges
        if count(legend, COLOURS[k], 20) < 8:
            bad.append("the legend lacks the %s swatch" % k)
    # the resume mark: grey in the column of its step, in both panels
    xr = int(round(x0 + (x1 - x0) * resume / total))
    for name, top, bot in (("main", mt, mb), ("learning-rate", lt, lb)):
        strip = a[top + 3:bot - 2, xr - 2:xr + 3]
        grey = (np.abs(strip - 115).max(axis=2) <= 40).any(axis=1).mean()
        if grey < 0.4:
            bad.append("no resume line at step %g in the %s panel (%.0f%% of it)"
                       % (resume, name, 100 * grey))
    # text: the title, tick values left, right and below, the axis labels
    regions = {
        "title": dark[:mt - 4, :], "y tick values": dark[mt:mb, x0 - 40:x0 - 5],
        "metric tick values": dark[mt:mb, x1 + 5:x1 + 40],
        "x tick values": dark[lb + 6:lb + 22, x0:x1], "loss label": dark[mt:mb, :x0 - 45],
        "step label": dark[lb + 24:, x0:x1], "lr tick values": dark[lt:lb, x0 - 40:x0 - 5],
    }
    for name, r in regions.items():
        if r.sum() < 30:
            bad.append("no %s" % name)
    if len(groups(np.where(regions["y tick values"].any(axis=1))[0])) < 4:
        bad.append("fewer than 4 tick values on the loss axis")
    if len(groups(np.where(regions["x tick values"].any(axis=0))[0])) < 5:
        bad.append("fewer than 5 tick values on the step axis")
    if (a[mt - 4:] != b[mt - 4:]).any():
        bad.append("the plots of one run under two names differ outside the title")
    ta = np.where(dark[:mt - 4].any(axis=0))[0]
    tb = np.where((b.sum(axis=2) < 500)[:mt - 4].any(axis=0))[0]
    if not len(ta) or not len(tb) or (tb[-1] - tb[0]) < (ta[-1] - ta[0]) + 100:
        bad.append("the title does not grow with the run's name")
    if bad:
        sys.exit("plotcheck: " + "; ".join(bad))
    print("plotcheck: 960x600, panels at rows %d-%d and %d-%d, columns %d-%d: "
          "title, ticks, labels, legend, curves and the resume mark found" % (mt, mb, lt, lb, x0, x1))


if __name__ == "__main__":
    main()
