#!/usr/bin/env python3
"""vlabels.py: fixtures and the reference check for cdp-tile's vector labels.

    vlabels.py gen IMAGE.tif DIR
        writes, over IMAGE (any projected CRS), deterministic features made in
        the image's CRS and stored in other CRSs:
          DIR/feat.gpkg    layer 'feat' in EPSG:4326: polygons, lines and
                           points with attributes cls (integer, some NULL),
                           kind (string), w (real, a buffer distance)
          DIR/poly32.shp   the polygons in EPSG:32632 (another UTM zone)
          DIR/lines.geojson  the lines and points alone, in EPSG:4326
          DIR/extent.geojson  one polygon over about half of the image
          DIR/two.gpkg     two layers, 'a' and 'b'
          DIR/nocrs.shp    the polygons without a CRS (image coordinates)
    vlabels.py rasterize OUT.tif IMAGE VECTOR [the options of check]
        writes the reference of check over the whole image grid, with the
        ignore value as nodata (for cdp-evaluate's vector references)
    vlabels.py check STREAM IMAGE VECTOR [--burn V] [--field A]
        [--classes a,b] [--where SQL] [--all-touched] [--buffer D]
        [--buffer-field A] [--background V] [--extent FILE] [--ignore V]
        [--type u8|u16] [--s-srs CRS]
        decodes every record of STREAM (a cdp-tile stream of IMAGE) and
        compares its label with the same window of gdal_rasterize's of the
        whole image grid: the vector reprojected into the image's CRS as
        ogr2ogr -t_srs does, then gdal.Rasterize with -te/-ts on the image's
        extent (a tile's own extent would decide a geometry along its edge
        by that edge: cdp-tile's tiles agree with the scene's label).

Exits 1 naming the first tile that differs.
"""
import argparse
import os
import sys

import numpy as np
from osgeo import gdal, ogr, osr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crosscheck  # noqa: E402  (the stream decoder)

gdal.UseExceptions()
ogr.UseExceptions()

KINDS = ["bg", "house", "road", "field"]


def srs_of(epsg):
    s = osr.SpatialReference()
    s.ImportFromEPSG(epsg)
    s.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    return s


def gen(a):
    img = gdal.Open(a.image)
    gt = img.GetGeoTransform()
    W, H = img.RasterXSize, img.RasterYSize
    isr = osr.SpatialReference(wkt=img.GetProjection())
    isr.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    rng = np.random.default_rng(7)
    px = gt[1]

    def pt(x, y):
        return gt[0] + x * gt[1], gt[3] + y * gt[5]

    feats = []  # (wkt in image CRS, cls or None, kind, w)
    for i in range(40):
        cx, cy = rng.uniform(-10, W + 10), rng.uniform(-10, H + 10)
        n = int(rng.integers(3, 7))
        ang = np.sort(rng.uniform(0, 2 * np.pi, n))
        r = rng.uniform(1.5, 14, n)
        ring = [pt(cx + r[k] * np.cos(ang[k]), cy + r[k] * np.sin(ang[k])) for k in range(n)]
        ring.append(ring[0])
        wkt = "POLYGON((%s))" % ",".join("%.6f %.6f" % p for p in ring)
        feats.append((wkt, None if i % 9 == 4 else int(rng.integers(0, 4)),
                      KINDS[int(rng.integers(0, 4))], float(rng.uniform(0, 3 * px))))
    polys = list(feats)
    for i in range(10):
        n = int(rng.integers(2, 5))
        p = [pt(rng.uniform(-5, W + 5), rng.uniform(-5, H + 5)) for _ in range(n)]
        feats.append(("LINESTRING(%s)" % ",".join("%.6f %.6f" % q for q in p),
                      int(rng.integers(0, 4)), KINDS[int(rng.integers(0, 4))],
                      float(rng.uniform(0.5 * px, 2 * px))))
    for i in range(25):
        feats.append(("POINT(%.6f %.6f)" % pt(rng.uniform(0, W), rng.uniform(0, H)),
                      int(rng.integers(0, 4)), KINDS[int(rng.integers(0, 4))],
                      float(rng.uniform(px, 3 * px))))

    def write(path, drv, epsg, rows, layers=("feat",), gtype=ogr.wkbUnknown):
        ds = ogr.GetDriverByName(drv).CreateDataSource(path)
        dst = srs_of(epsg) if epsg else None
        ct = osr.CoordinateTransformation(isr, dst) if dst else None
        for ln in layers:
            lay = ds.CreateLayer(ln, dst, gtype)
            lay.CreateField(ogr.FieldDefn("cls", ogr.OFTInteger))
            lay.CreateField(ogr.FieldDefn("kind", ogr.OFTString))
            lay.CreateField(ogr.FieldDefn("w", ogr.OFTReal))
            for wkt, cls, kind, w in rows:
                f = ogr.Feature(lay.GetLayerDefn())
                g = ogr.CreateGeometryFromWkt(wkt)
                if ct:
                    g.Transform(ct)
                f.SetGeometry(g)
                if cls is not None:
                    f.SetField("cls", cls)
                f.SetField("kind", kind)
                f.SetField("w", w)
                lay.CreateFeature(f)
        ds = None

    d = a.dir
    write(os.path.join(d, "feat.gpkg"), "GPKG", 4326, feats)
    write(os.path.join(d, "poly32.shp"), "ESRI Shapefile", 32632, polys, gtype=ogr.wkbPolygon)
    write(os.path.join(d, "lines.geojson"), "GeoJSON", 4326, feats[len(polys):])
    write(os.path.join(d, "two.gpkg"), "GPKG", 4326, polys[:3], layers=("a", "b"))
    write(os.path.join(d, "nocrs.shp"), "ESRI Shapefile", 0, polys, gtype=ogr.wkbPolygon)
    x0, y0 = pt(W * 0.1, H * 0.2)
    x1, y1 = pt(W * 0.7, H * 0.9)
    ext = "POLYGON((%f %f,%f %f,%f %f,%f %f,%f %f))" % (x0, y0, x1, y0, x1, y1, x0, y1, x0, y0)
    write(os.path.join(d, "extent.geojson"), "GeoJSON", 4326, [(ext, 1, "bg", 0.0)])


def reprojected(path, wkt, s_srs=None):
    """The vector as ogr2ogr [-s_srs] -t_srs puts it into the image's CRS."""
    out = "/vsimem/ref_%s.gpkg" % os.path.basename(path)
    gdal.VectorTranslate(out, path, format="GPKG", dstSRS=wkt, srcSRS=s_srs)
    return gdal.OpenEx(out, gdal.OF_VECTOR)


def reference_layer(a, wkt, isr):
    """The label features in the image's CRS, buffered, each with its id in
    integer field 'id' (the ignore value for a NULL attribute)."""
    rds = reprojected(a.vector, wkt, a.s_srs)
    src = rds.GetLayer(0)
    if a.where:
        src.SetAttributeFilter(a.where)
    ds = gdal.GetDriverByName("Memory").Create("ref", 0, 0, 0, gdal.GDT_Unknown)
    lay = ds.CreateLayer("ref", isr, ogr.wkbUnknown)
    lay.CreateField(ogr.FieldDefn("id", ogr.OFTInteger))
    classes = a.classes.split(",") if a.classes else None
    for f in src:
        g = f.GetGeometryRef().Clone()
        if a.field is None:
            v = a.burn
        elif not f.IsFieldSetAndNotNull(a.field):
            v = a.ignore
        else:
            v = classes.index(f.GetField(a.field)) if classes else f.GetField(a.field)
        d = a.buffer
        if a.buffer_field:
            d = f.GetField(a.buffer_field) if f.IsFieldSetAndNotNull(a.buffer_field) else 0
        if d:
            g = g.Buffer(d, 8)
        o = ogr.Feature(lay.GetLayerDefn())
        o.SetGeometry(g)
        o.SetField("id", int(v))
        lay.CreateFeature(o)
    return ds, (rds, lay)


def burn(keep, ext, te, w, h, typ, a):
    """gdal_rasterize -te -ts of the reference features, the extent applied."""
    ref = gdal.Rasterize("", keep, format="MEM", outputBounds=te, width=w, height=h,
                         outputType=typ, initValues=[a.background],
                         allTouched=a.all_touched, attribute="id").ReadAsArray()
    if ext is not None:
        inside = gdal.Rasterize("", ext, format="MEM", outputBounds=te, width=w,
                                height=h, outputType=gdal.GDT_Byte, initValues=[0],
                                burnValues=[1]).ReadAsArray()
        ref[inside == 0] = a.ignore
    return ref


def rasterize(a):
    """The reference over the whole image grid, written as a GeoTIFF."""
    img = gdal.Open(a.image)
    wkt, g = img.GetProjection(), img.GetGeoTransform()
    W, H = img.RasterXSize, img.RasterYSize
    keep, _ = reference_layer(a, wkt, osr.SpatialReference(wkt=wkt))
    ext = reprojected(a.extent, wkt) if a.extent else None
    typ = gdal.GDT_Byte if a.type == "u8" else gdal.GDT_UInt16
    ref = burn(keep, ext, [g[0], g[3] + H * g[5], g[0] + W * g[1], g[3]], W, H, typ, a)
    out = gdal.GetDriverByName("GTiff").Create(a.stream, W, H, 1, typ)
    out.SetGeoTransform(g)
    out.SetProjection(wkt)
    out.GetRasterBand(1).SetNoDataValue(a.ignore)
    out.GetRasterBand(1).WriteArray(ref)
    out = None


def check(a):
    img = gdal.Open(a.image)
    wkt = img.GetProjection()
    isr = osr.SpatialReference(wkt=wkt)
    keep, _ = reference_layer(a, wkt, isr)
    ext = reprojected(a.extent, wkt) if a.extent else None
    recs, _ = crosscheck.read_stream(a.stream)
    if not recs:
        sys.exit("vlabels.py: %s has no records" % a.stream)
    ig = img.GetGeoTransform()
    W, H = img.RasterXSize, img.RasterYSize
    typ = gdal.GDT_Byte if a.type == "u8" else gdal.GDT_UInt16
    whole = burn(keep, ext, [ig[0], ig[3] + H * ig[5], ig[0] + W * ig[1], ig[3]], W, H, typ, a)
    nonbg = 0
    for key, buf in recs:
        r = crosscheck.decode(key, buf)
        S, g = r["width"], r["gt"]
        x0, y0 = round((g[0] - ig[0]) / ig[1]), round((g[3] - ig[3]) / ig[5])
        if r["label_kind"] != (1 if a.type == "u8" else 2):
            sys.exit("vlabels.py: %s: label kind %d, want %s" % (key, r["label_kind"], a.type))
        if x0 < 0 or y0 < 0 or x0 + S > W or y0 + S > H:
            sys.exit("vlabels.py: %s: the tile leaves the image" % key)
        ref = whole[y0:y0 + S, x0:x0 + S]
        got = r["label"]
        if r["ignore"] != a.ignore:
            sys.exit("vlabels.py: %s: ignore %d, want %d" % (key, r["ignore"], a.ignore))
        if got.dtype != ref.dtype or not np.array_equal(got, ref):
            bad = np.argwhere(got != ref)
            sys.exit("vlabels.py: %s: %d pixels differ from gdal_rasterize, first at "
                     "row, col %s: %d, want %d" % (key, len(bad), tuple(bad[0]),
                                                   got[tuple(bad[0])], ref[tuple(bad[0])]))
        nonbg += int(np.count_nonzero(ref != a.background))
    if nonbg == 0:
        sys.exit("vlabels.py: no tile has a feature: the check proves nothing")
    print("vlabels.py: %d tiles match gdal_rasterize (%d feature pixels)" % (len(recs), nonbg))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("image")
    g.add_argument("dir")
    for name in ("check", "rasterize"):
        c = sub.add_parser(name)
        c.add_argument("stream", help="check: the stream; rasterize: OUT.tif")
        c.add_argument("image")
        c.add_argument("vector")
        c.add_argument("--burn", type=int, default=1)
        c.add_argument("--field")
        c.add_argument("--classes")
        c.add_argument("--where")
        c.add_argument("--all-touched", action="store_true")
        c.add_argument("--buffer", type=float, default=0)
        c.add_argument("--buffer-field")
        c.add_argument("--background", type=int, default=0)
        c.add_argument("--extent")
        c.add_argument("--ignore", type=int, default=255)
        c.add_argument("--type", choices=["u8", "u16"], default="u8")
        c.add_argument("--s-srs", help="the vector's CRS, for one without")
    a = ap.parse_args()
    if a.cmd == "gen":
        gen(a)
    elif a.cmd == "rasterize":
        rasterize(a)
    else:
        check(a)


if __name__ == "__main__":
    main()
