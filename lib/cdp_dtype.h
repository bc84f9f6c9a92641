/* cdp_dtype.h: the pixel data types of a tile record.
 *
 * The numeric values are part of the on-disk record format (cdp-record(5))
 * and never change.
 */
#ifndef CDP_DTYPE_H
#define CDP_DTYPE_H

#include <stddef.h>

typedef enum cdp_dtype {
	CDP_DT_U8 = 1, CDP_DT_U16 = 2, CDP_DT_I16 = 3, CDP_DT_U32 = 4,
	CDP_DT_I32 = 5, CDP_DT_F32 = 6, CDP_DT_F64 = 7
} cdp_dtype;

/* Bytes per sample, or 0 for an unknown type. */
size_t cdp_dtype_size(int dt);
/* "u8", "u16", ..., or NULL for an unknown type. */
const char *cdp_dtype_name(int dt);
/* Inverse of cdp_dtype_name; 0 if unknown. */
int cdp_dtype_parse(const char *name);
/* The smallest and largest value of type dt: -HUGE_VAL and HUGE_VAL for
 * the floating-point and unknown types. */
double cdp_dtype_min(int dt);
double cdp_dtype_max(int dt);
/* Sample i of a buffer of type dt, as a double (0 for an unknown type). The
 * buffer need not be aligned. */
double cdp_dtype_get(int dt, const void *buf, size_t i);
/* Converts n samples to float32 (the trainer's input); src need not be
 * aligned, and may equal dst for f32. An unknown type gives zeros. */
void cdp_dtype_to_f32(int dt, const void *src, float *dst, size_t n);

#endif
