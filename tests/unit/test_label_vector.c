/* test_label_vector.c: cdp_label_vector.h against pixel centres worked out
 * by hand.
 *
 * GeoJSON layers (EPSG:4326, as GeoJSON always is) are written into a
 * temporary directory and rasterized onto a 10x10 grid of 1-degree pixels in
 * the same CRS: two overlapping rectangles (the later wins), a point whose
 * attribute is NULL (the ignore value), a window cut from the grid (the
 * same pixels), a completeness extent, the label type, the suffix search
 * and the refusals; the options' one-line record. The expected label of each pixel comes from testing its
 * centre against the rectangles, not from GDAL.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdp_error.h"
#include "cdp_label_vector.h"
#include "cdp_raster.h"
#include "cdp_record.h"
#include "tap.h"

#define WKT "GEOGCS[\"WGS 84\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\"," \
	"6378137,298.257223563]],PRIMEM[\"Greenwich\",0]," \
	"UNIT[\"degree\",0.0174532925199433],AUTHORITY[\"EPSG\",\"4326\"]]"

static char dir[256];

static const char *tmp(const char *name)
{
	return tap_path(dir, name);
}

static void put(const char *name, const char *text)
{
	FILE *f = fopen(tmp(name), "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

#define RECT(x0, y0, x1, y1) \
	"{\"type\":\"Polygon\",\"coordinates\":[[[" #x0 "," #y0 "],[" #x1 "," #y0 "],[" \
	#x1 "," #y1 "],[" #x0 "," #y1 "],[" #x0 "," #y0 "]]]}"
#define FEAT(props, geom) "{\"type\":\"Feature\",\"properties\":" props ",\"geometry\":" geom "}"

/* rectangle A (2.2..5.7, 3.3..7.8) cls 3, then B (4.2..8.9, 1.1..6.8) cls 5,
 * then a point at (0.5, 0.5) with cls NULL */
static const char LABELS[] = "{\"type\":\"FeatureCollection\",\"features\":["
	FEAT("{\"cls\":3,\"kind\":\"house\"}", RECT(2.2, 3.3, 5.7, 7.8)) ","
	FEAT("{\"cls\":5,\"kind\":\"road\"}", RECT(4.2, 1.1, 8.9, 6.8)) ","
	FEAT("{\"cls\":null,\"kind\":\"house\"}",
	     "{\"type\":\"Point\",\"coordinates\":[0.5,0.5]}") "]}";

static const double GT[6] = { 0, 1, 0, 10, 0, -1 };

static int in_rect(double x, double y, double x0, double y0, double x1, double y1)
{
	return x > x0 && x < x1 && y > y0 && y < y1;
}

/* The label of pixel (r, c) of the 10x10 grid from pixel centres. */
static unsigned expect(int r, int c, unsigned a, unsigned b, unsigned null_id,
                       unsigned bg)
{
	double x = c + 0.5, y = 10 - (r + 0.5);

	if (r == 9 && c == 0)
		return null_id;
	if (in_rect(x, y, 4.2, 1.1, 8.9, 6.8))
		return b;
	if (in_rect(x, y, 2.2, 3.3, 5.7, 7.8))
		return a;
	return bg;
}

static void test_rasterize(void)
{
	cdp_label_vector_opts o;
	cdp_label_vector *v = NULL;
	uint8_t got[100], win[4 * 3];
	char err[512];
	int bad = 0;

	put("lab.geojson", LABELS);
	cdp_label_vector_opts_init(&o);
	o.field = "cls";
	o.background = 1;
	CHECK(cdp_label_vector_is_vector(tmp("lab.geojson")) == 1, "a GeoJSON is a vector");
	CHECK_RC(cdp_label_vector_open(tmp("lab.geojson"), &o, WKT, &v, err, sizeof err),
	         CDP_OK);
	if (!v)
		return;
	CHECK(cdp_label_vector_kind(v) == CDP_LABEL_U8, "ids below 255 are u8");
	CHECK_RC(cdp_label_vector_read(v, GT, 10, 10, 200, got, err, sizeof err), CDP_OK);
	for (int r = 0; r < 10; r++)
		for (int c = 0; c < 10; c++)
			bad += got[r * 10 + c] != expect(r, c, 3, 5, 200, 1);
	CHECK(bad == 0, "%d pixels differ from their centres' labels", bad);

	/* a 3-wide, 4-high window at column 3, row 2 is the same pixels */
	{
		const double wgt[6] = { 3, 1, 0, 8, 0, -1 };
		bad = 0;
		CHECK_RC(cdp_label_vector_read(v, wgt, 3, 4, 200, win, err, sizeof err), CDP_OK);
		for (int r = 0; r < 4; r++)
			for (int c = 0; c < 3; c++)
				bad += win[r * 3 + c] != got[(r + 2) * 10 + c + 3];
		CHECK(bad == 0, "a window differs from the grid in %d pixels", bad);
	}
	cdp_label_vector_close(v);

	/* burn 300: u16; an extent over x < 5 ignores the rest */
	put("ext.geojson", "{\"type\":\"FeatureCollection\",\"features\":["
	    FEAT("{}", RECT(0, 0, 5, 10)) "]}");
	cdp_label_vector_opts_init(&o);
	o.burn = 300;
	o.extent = tmp("ext.geojson");
	CHECK_RC(cdp_label_vector_open(tmp("lab.geojson"), &o, WKT, &v, err, sizeof err),
	         CDP_OK);
	if (!v)
		return;
	CHECK(cdp_label_vector_kind(v) == CDP_LABEL_U16, "burn 300 is u16");
	{
		uint16_t g16[100];
		bad = 0;
		CHECK_RC(cdp_label_vector_read(v, GT, 10, 10, 65535, g16, err, sizeof err),
		         CDP_OK);
		for (int r = 0; r < 10; r++)
			for (int c = 0; c < 10; c++)
				bad += g16[r * 10 + c] != (c >= 5 ? 65535
				                           : expect(r, c, 300, 300, 300, 0));
		CHECK(bad == 0, "u16 with extent: %d pixels differ", bad);
	}
	cdp_label_vector_close(v);
}

static void test_refusals(void)
{
	static const char *const classes[] = { "bg", "house" };
	cdp_label_vector_opts o;
	cdp_label_vector *v = NULL;
	char err[512], *path = NULL;

	cdp_label_vector_opts_init(&o);
	o.field = "kind";
	CHECK_RC(cdp_label_vector_open(tmp("lab.geojson"), &o, WKT, &v, err, sizeof err),
	         CDP_EFORMAT);
	CHECK(strstr(err, "is a string") != NULL, "string without classes: %s", err);
	o.classes = classes;
	o.nclasses = 2;
	CHECK_RC(cdp_label_vector_open(tmp("lab.geojson"), &o, WKT, &v, err, sizeof err),
	         CDP_EMISMATCH);
	CHECK(strstr(err, "'kind' = 'road' is none of --classes") != NULL, "unknown: %s", err);
	cdp_label_vector_opts_init(&o);
	o.burn = 255;
	o.type = CDP_LABEL_U8;
	CHECK_RC(cdp_label_vector_open(tmp("lab.geojson"), &o, WKT, &v, err, sizeof err),
	         CDP_ERANGE);
	o.type = 0;
	o.layer = "nope";
	CHECK_RC(cdp_label_vector_open(tmp("lab.geojson"), &o, WKT, &v, err, sizeof err),
	         CDP_EFORMAT);
	CHECK(v == NULL, "no label on failure");
	CHECK(cdp_label_vector_is_vector(tmp("none.gpkg")) == 0, "a missing file is no vector");

	/* the suffix search: none, one, two candidates */
	CHECK_RC(cdp_label_vector_find(tmp("img.tif"), "_l", &path, err, sizeof err), CDP_OK);
	CHECK(path && !strcmp(path, tmp("img_l.tif")), "none: the raster name %s", path);
	free(path);
	put("img_l.fgb", "");
	CHECK_RC(cdp_label_vector_find(tmp("img.tif"), "_l", &path, err, sizeof err), CDP_OK);
	CHECK(path && !strcmp(path, tmp("img_l.fgb")), "one: %s", path);
	free(path);
	put("img_l.shp", "");
	CHECK_RC(cdp_label_vector_find(tmp("img.tif"), "_l", &path, err, sizeof err),
	         CDP_EMISMATCH);
	CHECK(path == NULL && strstr(err, "img_l.shp") && strstr(err, "img_l.fgb"),
	      "two: %s", err);
}

/* The record of the options is one line a shell reads back: a value with
 * a control character (a --label-where on two lines) as $'...' with
 * escapes (it was refused, after the stream had begun), one with a quote in
 * '...', a plain one bare. */
static void test_describe(void)
{
	cdp_label_vector_opts o;
	char out[256];

	cdp_label_vector_opts_init(&o);
	o.layer = "roads";
	o.where = "k = 'a'\n OR k = 'b'";
	o.field = "it's";
	o.crs = "a\\b\t\001f\x7f";
	CHECK_RC(cdp_label_vector_describe(&o, out, sizeof out), CDP_OK);
	CHECK(strcmp(out, "--label-layer roads --label-field 'it'\\''s' --label-where "
	              "$'k = \\'a\\'\\n OR k = \\'b\\'' --background 0 --label-crs "
	              "$'a\\\\b\\t\\x01f\\x7f'") == 0, "describe: %s", out);
	CHECK_RC(cdp_label_vector_describe(&o, out, 40), CDP_ERANGE);
	CHECK(out[0] == '\0', "a description cut short is left empty: %s", out);
}

int main(void)
{
	if (tap_tmpdir(dir, sizeof dir, "test_label_vector"))
		return 99;
	cdp_raster_init();
	test_rasterize();
	test_refusals();
	test_describe();
	tap_tmpdir_remove(dir);
	return tap_done();
}
