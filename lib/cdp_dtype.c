/* cdp_dtype.c: sizes, names and conversions of the record pixel types.
 *
 * Buffers come straight from LMDB pages and record bodies, so they may be
 * unaligned: every sample is read with memcpy(), which compilers turn into a
 * plain load where the target allows it.
 */
#include "cdp_dtype.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static const struct {
	const char *name;
	size_t size;
} dtypes[] = {
	[CDP_DT_U8]  = { "u8",  1 },
	[CDP_DT_U16] = { "u16", 2 },
	[CDP_DT_I16] = { "i16", 2 },
	[CDP_DT_U32] = { "u32", 4 },
	[CDP_DT_I32] = { "i32", 4 },
	[CDP_DT_F32] = { "f32", 4 },
	[CDP_DT_F64] = { "f64", 8 },
};

static int known(int dt)
{
	return dt >= CDP_DT_U8 && dt <= CDP_DT_F64;
}

size_t cdp_dtype_size(int dt)
{
	return known(dt) ? dtypes[dt].size : 0;
}

const char *cdp_dtype_name(int dt)
{
	return known(dt) ? dtypes[dt].name : NULL;
}

int cdp_dtype_parse(const char *name)
{
	if (!name)
		return 0;
	for (int dt = CDP_DT_U8; dt <= CDP_DT_F64; dt++)
		if (strcmp(name, dtypes[dt].name) == 0)
			return dt;
	return 0;
}

/* Reads sample i of type T from a possibly unaligned buffer. */
#define LOAD(T, buf, i) \
	({ T v_; memcpy(&v_, (const unsigned char *)(buf) + (i) * sizeof(T), sizeof(T)); v_; })

double cdp_dtype_min(int dt)
{
	switch (dt) {
	case CDP_DT_U8: case CDP_DT_U16: case CDP_DT_U32: return 0;
	case CDP_DT_I16: return -32768;
	case CDP_DT_I32: return -2147483648.0;
	default: return -HUGE_VAL;
	}
}

double cdp_dtype_max(int dt)
{
	switch (dt) {
	case CDP_DT_U8: return 255;
	case CDP_DT_U16: return 65535;
	case CDP_DT_I16: return 32767;
	case CDP_DT_U32: return 4294967295.0;
	case CDP_DT_I32: return 2147483647.0;
	default: return HUGE_VAL;
	}
}

double cdp_dtype_get(int dt, const void *buf, size_t i)
{
	switch (dt) {
	case CDP_DT_U8:  return LOAD(uint8_t, buf, i);
	case CDP_DT_U16: return LOAD(uint16_t, buf, i);
	case CDP_DT_I16: return LOAD(int16_t, buf, i);
	case CDP_DT_U32: return LOAD(uint32_t, buf, i);
	case CDP_DT_I32: return LOAD(int32_t, buf, i);
	case CDP_DT_F32: return LOAD(float, buf, i);
	case CDP_DT_F64: return LOAD(double, buf, i);
	default:         return 0.0;
	}
}

/* One loop per type so the conversion vectorises; u32 and i32 above 2^24 and
 * f64 round to the nearest float. */
#define CONVERT(T) \
	for (size_t i = 0; i < n; i++) \
		dst[i] = (float)LOAD(T, src, i); \
	break

void cdp_dtype_to_f32(int dt, const void *src, float *dst, size_t n)
{
	switch (dt) {
	case CDP_DT_U8:  CONVERT(uint8_t);
	case CDP_DT_U16: CONVERT(uint16_t);
	case CDP_DT_I16: CONVERT(int16_t);
	case CDP_DT_U32: CONVERT(uint32_t);
	case CDP_DT_I32: CONVERT(int32_t);
	case CDP_DT_F32: memmove(dst, src, n * sizeof(float)); break;
	case CDP_DT_F64: CONVERT(double);
	default:
		/* An unknown type gives zeros rather than garbage. */
		memset(dst, 0, n * sizeof(float));
		break;
	}
}
