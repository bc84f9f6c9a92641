/* test_key.c: NAME_ROW_COL keys: padding, parsing from the right, stems and
 * glob matching.
 *
 * The property readers rely on: keys of one raster sort bytewise in row-major
 * grid order, and parse back to the name, row and column they were made of.
 */
#include "cdp_error.h"
#include "cdp_key.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static void test_digits(void)
{
	CHECK(cdp_key_digits(0) == 1, "digits(0)");
	CHECK(cdp_key_digits(1) == 1, "digits(1)");
	CHECK(cdp_key_digits(10) == 1, "digits(10)");
	CHECK(cdp_key_digits(11) == 2, "digits(11)");
	CHECK(cdp_key_digits(100) == 2, "digits(100)");
	CHECK(cdp_key_digits(101) == 3, "digits(101)");
	CHECK(cdp_key_digits(UINT64_MAX) == 20, "digits(max) = %d",
	      cdp_key_digits(UINT64_MAX));
}

static void test_name_check(void)
{
	char longname[CDP_NAME_MAX + 2];

	CHECK_RC(cdp_key_name_check("scene.1"), CDP_OK);
	CHECK_RC(cdp_key_name_check("dop_2020+v2-A"), CDP_OK);
	CHECK_RC(cdp_key_name_check("_"), CDP_OK);
	CHECK_RC(cdp_key_name_check(""), CDP_EKEY);
	CHECK_RC(cdp_key_name_check("a b"), CDP_EKEY);
	CHECK_RC(cdp_key_name_check("a/b"), CDP_EKEY);
	CHECK_RC(cdp_key_name_check("a*"), CDP_EKEY);
	CHECK_RC(cdp_key_name_check("stra\xc3\x9f" "e"), CDP_EKEY);
	memset(longname, 'n', CDP_NAME_MAX);
	longname[CDP_NAME_MAX] = '\0';
	CHECK_RC(cdp_key_name_check(longname), CDP_OK);
	longname[CDP_NAME_MAX] = 'n';
	longname[CDP_NAME_MAX + 1] = '\0';
	CHECK_RC(cdp_key_name_check(longname), CDP_EKEY);
}

static void test_format_parse(void)
{
	char key[CDP_KEY_MAX], name[CDP_NAME_MAX + 1], small[8];
	char longname[CDP_NAME_MAX + 1];
	uint64_t row = 99, col = 99;

	CHECK_RC(cdp_key_format(key, sizeof key, "dop_2020", 3, 2, 7, 3), CDP_OK);
	CHECK(strcmp(key, "dop_2020_03_007") == 0, "got \"%s\"", key);
	CHECK_RC(cdp_key_parse(key, strlen(key), name, sizeof name, &row, &col),
	         CDP_OK);
	CHECK(strcmp(name, "dop_2020") == 0 && row == 3 && col == 7,
	      "parsed \"%s\" %llu %llu", name, (unsigned long long)row,
	      (unsigned long long)col);

	/* Round trip over a grid, and byte order equals row-major order. */
	{
		int rd = cdp_key_digits(12), cd = cdp_key_digits(101), ok = 1;
		char prev[CDP_KEY_MAX] = "";

		for (uint64_t r = 0; r < 12; r++)
			for (uint64_t c = 0; c < 101; c++) {
				if (cdp_key_format(key, sizeof key, "a_b", r, rd, c,
				                   cd) != CDP_OK ||
				    cdp_key_parse(key, strlen(key), name, sizeof name,
				                  &row, &col) != CDP_OK ||
				    strcmp(name, "a_b") != 0 || row != r ||
				    col != c || strcmp(prev, key) >= 0)
					ok = 0;
				strcpy(prev, key);
			}
		CHECK(ok, "grid round trip or ordering failed at \"%s\"", key);
	}

	/* A key need not be NUL-terminated (LMDB hands out lengths). */
	memcpy(small, "x_1_2zzz", 8);
	CHECK_RC(cdp_key_parse(small, 5, name, sizeof name, &row, &col), CDP_OK);
	CHECK(strcmp(name, "x") == 0 && row == 1 && col == 2, "length-bounded");

	/* Formatting refuses what could not be parsed or sorted back. */
	CHECK_RC(cdp_key_format(key, sizeof key, "a b", 0, 1, 0, 1), CDP_EKEY);
	CHECK_RC(cdp_key_format(key, sizeof key, "", 0, 1, 0, 1), CDP_EKEY);
	CHECK_RC(cdp_key_format(key, sizeof key, "a", 10, 1, 0, 1), CDP_EINVAL);
	CHECK_RC(cdp_key_format(key, sizeof key, "a", 0, 0, 0, 1), CDP_EINVAL);
	/* "ab_1_10" needs 8 bytes with its NUL: fits; one more does not, and
	 * no truncated key is left in the buffer. */
	CHECK_RC(cdp_key_format(small, sizeof small, "ab", 1, 1, 10, 2), CDP_OK);
	CHECK(strcmp(small, "ab_1_10") == 0, "got \"%s\"", small);
	CHECK_RC(cdp_key_format(small, sizeof small, "abc", 1, 1, 10, 2),
	         CDP_EKEY);
	CHECK(small[0] == '\0', "truncated key \"%s\" left behind", small);
	/* Longest name and widest indices still fit CDP_KEY_MAX. */
	memset(longname, 'n', CDP_NAME_MAX);
	longname[CDP_NAME_MAX] = '\0';
	CHECK_RC(cdp_key_format(key, sizeof key, longname, UINT64_MAX, 20,
	                        UINT64_MAX, 20), CDP_OK);
	CHECK_RC(cdp_key_parse(key, strlen(key), name, sizeof name, &row, &col),
	         CDP_OK);
	CHECK(row == UINT64_MAX && col == UINT64_MAX &&
	      strcmp(name, longname) == 0, "widest key round trip");
	CHECK_RC(cdp_key_parse(key, strlen(key), small, sizeof small, &row, &col),
	         CDP_EINVAL);
}

static void test_parse_bad(void)
{
	static const char *const bad[] = { "", "abc", "a_1", "_1_2", "a__1",
		"a_1_", "a_x_1", "a_1_x", "a b_1_2", "a_1_-2", "a_1_+2", "a_1_ 2",
		"a_18446744073709551616_0", "a_000000000000000000001_0" };
	char name[CDP_NAME_MAX + 1], key[CDP_KEY_MAX + 8];
	uint64_t row, col;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(cdp_key_parse(bad[i], strlen(bad[i]), name, sizeof name,
		                    &row, &col) == CDP_EKEY, "\"%s\" parsed", bad[i]);
	/* An embedded NUL is not a key byte. */
	CHECK_RC(cdp_key_parse("a\0b_1_2", 7, name, sizeof name, &row, &col),
	         CDP_EKEY);
	/* Too long for CDP_KEY_MAX, and a name over CDP_NAME_MAX. */
	memset(key, 'k', sizeof key);
	memcpy(key + CDP_KEY_MAX - 4, "_1_2", 4);
	CHECK_RC(cdp_key_parse(key, CDP_KEY_MAX, name, sizeof name, &row, &col),
	         CDP_EKEY);
	memcpy(key + CDP_NAME_MAX + 1, "_1_2", 4);
	CHECK_RC(cdp_key_parse(key, CDP_NAME_MAX + 5, name, sizeof name, &row,
	                       &col), CDP_EKEY);
	memcpy(key + CDP_NAME_MAX, "_1_2", 4);
	CHECK_RC(cdp_key_parse(key, CDP_NAME_MAX + 4, name, sizeof name, &row,
	                       &col), CDP_OK);
}

static void test_stem(void)
{
	char name[CDP_NAME_MAX + 1], tiny[4];
	char *longpath;

	CHECK_RC(cdp_key_stem("/a/b/scene.1.tif", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "scene.1") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("scene.tif", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "scene") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("noext", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "noext") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("dir.d/my scene(2).tif", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "my-scene-2-") == 0, "got \"%s\"", name);
	/* one '-' per character: é (2 bytes), € (3), 😀 (4); a stray byte
	 * (\xff, a lone continuation \x80, a cut sequence) is one each */
	CHECK_RC(cdp_key_stem("my scene \xc3\xa9.tif", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "my-scene--") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("\xe2\x82\xac\xf0\x9f\x98\x80x.tif", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "--x") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("a\xff\x80" "b\xc3.tif", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "a--b-") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("\xe0\x80\x80.tif", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "---") == 0, "overlong: got \"%s\"", name);
	CHECK_RC(cdp_key_stem("a/dop_2020_x.TIF", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "dop_2020_x") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("/x/.hidden", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, ".hidden") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("/x/", name, sizeof name), CDP_EKEY);
	CHECK_RC(cdp_key_stem("", name, sizeof name), CDP_EKEY);
	CHECK_RC(cdp_key_stem("a/b.", name, sizeof name), CDP_OK);
	CHECK(strcmp(name, "b") == 0, "got \"%s\"", name);
	CHECK_RC(cdp_key_stem("longer.tif", tiny, sizeof tiny), CDP_EKEY);
	longpath = malloc(CDP_NAME_MAX + 8);
	if (longpath) {
		memset(longpath, 'p', CDP_NAME_MAX + 1);
		strcpy(longpath + CDP_NAME_MAX + 1, ".tif");
		CHECK_RC(cdp_key_stem(longpath, name, sizeof name), CDP_EKEY);
		free(longpath);
	}
}

static void test_match(void)
{
	CHECK(cdp_key_match("*", "a_1_2"), "* matches all");
	CHECK(cdp_key_match("dop_2020_*", "dop_2020_03_07"), "prefix");
	CHECK(cdp_key_match("*_0?_07", "dop_2020_03_07"), "? and '*' across _");
	CHECK(cdp_key_match("scene_[0-1]_*", "scene_1_5"), "bracket");
	CHECK(!cdp_key_match("scene_[0-1]_*", "scene_2_5"), "bracket miss");
	CHECK(!cdp_key_match("dop_2021_*", "dop_2020_03_07"), "wrong prefix");
	CHECK(!cdp_key_match("a_1_2", "a_1_23"), "no implicit trailing *");
}

/* The grammar of cdp_key.h: tiles and chips, with or without CLASS/. */
static void test_scene(void)
{
	static const struct { const char *key, *scene; int kind; uint64_t row, col; } ok[] = {
		{ "dop_2020_03_07", "dop_2020", CDP_KEY_TILE, 3, 7 },
		{ "green_000", "green_000", CDP_KEY_CHIP, 0, 0 },
		{ "scene.1", "scene.1", CDP_KEY_CHIP, 0, 0 },
		{ "lake/lake_017", "lake/lake_017", CDP_KEY_CHIP, 0, 0 },
		{ "lake/img_1_2", "lake/img", CDP_KEY_TILE, 1, 2 },
		{ "a_b_", "a_b_", CDP_KEY_CHIP, 0, 0 },
	};
	static const char *const bad[] = { "", "a b", "a/b/c", "/a", "a/", "a\x01",
	                                   "x/a*b", "stra\xc3\x9f" "e" };
	char scene[CDP_KEY_MAX], key[CDP_KEY_MAX], tiny[4], longname[CDP_NAME_MAX + 2];
	uint64_t row = 9, col = 9;

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		int rc = cdp_key_scene(ok[i].key, strlen(ok[i].key), scene, sizeof scene, &row, &col);
		CHECK(rc == ok[i].kind && strcmp(scene, ok[i].scene) == 0 && row == ok[i].row &&
		      col == ok[i].col, "'%s': kind %d scene '%s' %llu %llu", ok[i].key, rc, scene,
		      (unsigned long long)row, (unsigned long long)col);
		CHECK_RC(cdp_key_scene_check(ok[i].scene), CDP_OK);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(cdp_key_scene(bad[i], strlen(bad[i]), scene, sizeof scene, NULL, NULL) ==
		      CDP_EKEY, "bad key %zu accepted", i);
		CHECK(cdp_key_scene_check(bad[i]) == CDP_EKEY, "bad scene %zu accepted", i);
	}
	/* a NUL inside, and a scene that does not fit */
	CHECK_RC(cdp_key_scene("a\0b", 3, scene, sizeof scene, NULL, NULL), CDP_EKEY);
	CHECK_RC(cdp_key_scene("abcd", 4, tiny, sizeof tiny, NULL, NULL), CDP_EINVAL);
	CHECK_RC(cdp_key_scene("abcd_1_2", 8, tiny, sizeof tiny, NULL, NULL), CDP_EINVAL);

	CHECK_RC(cdp_key_chip(key, sizeof key, "lake", "lake_017"), CDP_OK);
	CHECK(strcmp(key, "lake/lake_017") == 0, "got '%s'", key);
	CHECK_RC(cdp_key_chip(key, sizeof key, NULL, "green_000"), CDP_OK);
	CHECK(strcmp(key, "green_000") == 0, "got '%s'", key);
	CHECK_RC(cdp_key_chip(key, sizeof key, "a/b", "c"), CDP_EKEY);
	CHECK_RC(cdp_key_chip(key, sizeof key, "a", "b c"), CDP_EKEY);
	CHECK_RC(cdp_key_chip(tiny, sizeof tiny, "ab", "cd"), CDP_EKEY);
	CHECK(tiny[0] == '\0', "a key that does not fit leaves \"%s\"", tiny);
	/* two names of CDP_NAME_MAX make a key over CDP_KEY_MAX */
	memset(longname, 'n', CDP_NAME_MAX);
	longname[CDP_NAME_MAX] = '\0';
	CHECK_RC(cdp_key_chip(key, sizeof key, longname, longname), CDP_EKEY);
}

int main(void)
{
	test_digits();
	test_name_check();
	test_format_parse();
	test_parse_bad();
	test_stem();
	test_match();
	test_scene();
	return tap_done();
}
