/* cdp_raster_impl.h: what the GDAL side of cdp_raster.h shares between
 * its files, private to them: the raster itself and the error helpers.
 *   cdp_raster.c        opening, reading, masks, nodata, CRSs
 *   cdp_raster_write.c  GeoTIFFs written through a temporary name
 *   cdp_raster_warp.c   transformers between grids, warps, dates warped
 *                       onto the first date's grid, overlaps
 */
#ifndef CDP_RASTER_IMPL_H
#define CDP_RASTER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <gdal.h>

#include "cdp_raster.h"

struct cdp_raster {
	GDALDatasetH ds;
	cdp_raster_info info;
	char *crs;
	cdp_raster_gcp *gcps;       /* [info.ngcps] */
	char *gcp_crs;
	/* a warped view (cdp_raster_open_time's later dates): ds is a
	 * VRTWarpedDataset over src, which holds its own reference to src */
	GDALDatasetH src;
	/* a multi-date input: ds is NULL and the bands are the dates' bands
	 * stacked, date d's band b (1-based) being band d * bpd + b */
	cdp_raster **dates;
	int ndates;
	uint32_t bpd;
	/* a warped view's alpha band (0 where the warp covers nothing), past
	 * its data bands; 0 for any other raster. GDAL takes a trailing alpha
	 * band for the mask only of 2 or 4 bands of Byte or UInt16, so it is
	 * read as the coverage explicitly. */
	int alpha;
};

/* the GDALDataType of a cdp_dtype (GDT_Unknown for none) */
int cdp_raster_gdt(int dt);
/* GDAL's last message (or fallback) into err as one line without a
 * trailing full stop, the tools' message style */
void cdp_raster_gdal_err(char *err, size_t errcap, const char *fallback);
/* msg into err, when there is one */
void cdp_raster_set_err(char *err, size_t errcap, const char *msg);
/* r's info, CRS and GCPs from its dataset (r->ds) */
int cdp_raster_describe(cdp_raster *r, char *err, size_t errcap);

#endif
