/* test_dtype.c: the pixel types' sizes, names and conversions.
 *
 * Sizes and numeric ids are part of the record format, so they are checked
 * literally; every conversion is checked at the type's extremes and from an
 * unaligned buffer, as record bodies in LMDB pages can be.
 */
#include "cdp_dtype.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static const struct { int dt; size_t size; const char *name; } types[] = {
	{ CDP_DT_U8, 1, "u8" }, { CDP_DT_U16, 2, "u16" }, { CDP_DT_I16, 2, "i16" },
	{ CDP_DT_U32, 4, "u32" }, { CDP_DT_I32, 4, "i32" },
	{ CDP_DT_F32, 4, "f32" }, { CDP_DT_F64, 8, "f64" } };

static void test_table(void)
{
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		const char *n = cdp_dtype_name(types[i].dt);

		CHECK(types[i].dt == (int)i + 1, "id of %s changed", types[i].name);
		CHECK(cdp_dtype_size(types[i].dt) == types[i].size, "size of %s",
		      types[i].name);
		CHECK(n && strcmp(n, types[i].name) == 0, "name of %d", types[i].dt);
		CHECK(cdp_dtype_parse(types[i].name) == types[i].dt, "parse %s",
		      types[i].name);
	}
	CHECK(cdp_dtype_size(0) == 0 && cdp_dtype_size(8) == 0 &&
	      cdp_dtype_size(-1) == 0, "unknown sizes");
	CHECK(cdp_dtype_name(0) == NULL && cdp_dtype_name(8) == NULL, "unknown names");
	CHECK(cdp_dtype_parse("U8") == 0 && cdp_dtype_parse("uint8") == 0 &&
	      cdp_dtype_parse("") == 0 && cdp_dtype_parse("u8 ") == 0 &&
	      cdp_dtype_parse(NULL) == 0, "parse of unknown names");
}

/* Writes n samples of dt at buf + 1 (misaligned), converts, compares with want. */
#define CHECK_TYPE(dt, T, ...) do { \
	const T vals_[] = { __VA_ARGS__ }; \
	enum { N_ = sizeof vals_ / sizeof vals_[0] }; \
	unsigned char raw_[1 + sizeof vals_]; \
	float f_[N_]; \
	int ok_get_ = 1, ok_f32_ = 1; \
	memcpy(raw_ + 1, vals_, sizeof vals_); \
	cdp_dtype_to_f32(dt, raw_ + 1, f_, N_); \
	for (size_t i_ = 0; i_ < N_; i_++) { \
		if (cdp_dtype_get(dt, raw_ + 1, i_) != (double)vals_[i_]) \
			ok_get_ = 0; \
		if (f_[i_] != (float)vals_[i_]) \
			ok_f32_ = 0; \
	} \
	CHECK(ok_get_, "get %s", #T); \
	CHECK(ok_f32_, "to_f32 %s", #T); \
} while (0)

static void test_convert(void)
{
	float f[3], same[2] = { 1.5f, -2.0f };

	CHECK_TYPE(CDP_DT_U8, uint8_t, 0, 1, 127, 255);
	CHECK_TYPE(CDP_DT_U16, uint16_t, 0, 300, 65535);
	CHECK_TYPE(CDP_DT_I16, int16_t, -32768, -1, 0, 32767);
	CHECK_TYPE(CDP_DT_U32, uint32_t, 0, 16777216, 4294967295u);
	CHECK_TYPE(CDP_DT_I32, int32_t, INT32_MIN, -7, 0, INT32_MAX);
	CHECK_TYPE(CDP_DT_F32, float, -1.5f, 0.0f, 3.25e38f, 1e-45f);
	CHECK_TYPE(CDP_DT_F64, double, -2.5, 0.1, 1e300, -1e-300);

	/* Exact values spot-checked, not only "same as a cast". */
	{
		const int16_t s[3] = { -32768, 5, 32767 };
		cdp_dtype_to_f32(CDP_DT_I16, s, f, 3);
		CHECK(f[0] == -32768.0f && f[1] == 5.0f && f[2] == 32767.0f, "i16 values");
	}
	{
		const uint16_t u[2] = { 65535, 1000 };
		CHECK(cdp_dtype_get(CDP_DT_U16, u, 0) == 65535.0 &&
		      cdp_dtype_get(CDP_DT_U16, u, 1) == 1000.0, "u16 get");
	}
	/* f32 to f32 in place (src == dst). */
	cdp_dtype_to_f32(CDP_DT_F32, same, same, 2);
	CHECK(same[0] == 1.5f && same[1] == -2.0f, "in-place f32");
	/* An unknown type converts to zeros, never leaves garbage. */
	f[0] = f[1] = 7.0f;
	cdp_dtype_to_f32(0, same, f, 2);
	CHECK(f[0] == 0.0f && f[1] == 0.0f, "unknown type");
	CHECK(cdp_dtype_get(99, same, 0) == 0.0, "unknown get");
}

/* The ranges (cdp-train --init-norm's dtype scale, cdp-predict's check). */
static void test_range(void)
{
	CHECK(cdp_dtype_max(CDP_DT_U8) == 255 && cdp_dtype_max(CDP_DT_U16) == 65535 &&
	      cdp_dtype_max(CDP_DT_I16) == 32767 && cdp_dtype_min(CDP_DT_I16) == -32768 &&
	      cdp_dtype_max(CDP_DT_U32) == 4294967295.0 && cdp_dtype_min(CDP_DT_U8) == 0 &&
	      cdp_dtype_min(CDP_DT_I32) == -2147483648.0, "integer ranges");
	CHECK(isinf(cdp_dtype_max(CDP_DT_F32)) && isinf(cdp_dtype_min(CDP_DT_F64)) &&
	      isinf(cdp_dtype_max(0)), "floats and unknown types are unbounded");
}

int main(void)
{
	test_range();
	test_table();
	test_convert();
	return tap_done();
}
