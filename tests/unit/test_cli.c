/* test_cli.c: the option parsers and messages every program shares.
 *
 * Each error must give exactly one line, "PROG: OPT: 'ARG' is not WANT", on
 * the stream given to cdp_cli_init, leave *out alone and return the
 * cdp_num code; a good argument prints nothing. The getopt wrapper must name
 * the program as given (not argv[0]), keep getopt's own messages off, and
 * tell an unknown option, an ambiguous one, a missing argument and an
 * argument to a flag apart.
 */
#define _GNU_SOURCE
#include "config.h"

#include "cdp_cli.h"
#include "cdp_error.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *msg;
static size_t msglen;
static FILE *mem;

/* Messages go to a memory stream from here to got(). */
static void capture(void)
{
	free(msg);
	msg = NULL;
	mem = open_memstream(&msg, &msglen);
	if (!mem) {
		perror("open_memstream");
		exit(99);
	}
	cdp_cli_init("cdp-test", mem);
}

static const char *got(void)
{
	fclose(mem);
	mem = NULL;
	cdp_cli_init("cdp-test", NULL);
	return msg ? msg : "";
}

#define EXPECT_MSG(want) do { \
	const char *g_ = got(); \
	CHECK(strcmp(g_, want) == 0, "message '%s', want '%s'", g_, want); \
} while (0)

static void test_numbers(void)
{
	int i = 7;
	long l = 7;
	uint64_t u = 7;
	double d = 7;

	capture();
	CHECK_RC(cdp_cli_int("--size", "256", 1, 65536, &i), CDP_OK);
	CHECK(i == 256, "got %d", i);
	EXPECT_MSG("");

	capture();
	i = 7;
	CHECK_RC(cdp_cli_int("--size", "0", 1, 65536, &i), CDP_ERANGE);
	CHECK(i == 7, "*out changed to %d", i);
	EXPECT_MSG("cdp-test: --size: '0' is not an integer in 1..65536\n");

	/* a non-number reads like an out-of-range one: one line, what to type */
	capture();
	CHECK_RC(cdp_cli_int("--size", "abc", 1, 65536, &i), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: --size: 'abc' is not an integer in 1..65536\n");

	capture();
	CHECK_RC(cdp_cli_long("--steps", "-3", 1, INT32_MAX, &l), CDP_ERANGE);
	CHECK(l == 7, "*out changed");
	EXPECT_MSG("cdp-test: --steps: '-3' is not an integer in 1..2147483647\n");
	capture();
	CHECK_RC(cdp_cli_long("--steps", "12", 1, INT32_MAX, &l), CDP_OK);
	CHECK(l == 12, "got %ld", l);
	EXPECT_MSG("");

	capture();
	CHECK_RC(cdp_cli_u64("--seed", "-1", 0, UINT64_MAX, &u), CDP_ESYNTAX);
	CHECK(u == 7, "*out changed");
	EXPECT_MSG("cdp-test: --seed: '-1' is not an integer in 0..18446744073709551615\n");

	capture();
	CHECK_RC(cdp_cli_double("--lr", "0.5", 0, 100, 0, &d), CDP_OK);
	CHECK(d == 0.5, "got %g", d);
	CHECK_RC(cdp_cli_double("--max-nodata", "1", 0, 1, 0, &d), CDP_OK);
	CHECK(d == 1, "closed range: got %g", d);
	EXPECT_MSG("");
	capture();
	d = 7;
	CHECK_RC(cdp_cli_double("--lr", "1e3", 0, 100, 0, &d), CDP_ERANGE);
	CHECK(d == 7, "*out changed");
	EXPECT_MSG("cdp-test: --lr: '1e3' is not a number in 0..100\n");
	/* bounds as the man pages write them, not %g's 1e+09 */
	capture();
	CHECK_RC(cdp_cli_double("--buffer", "2e9", 0, 1e9, 0, &d), CDP_ERANGE);
	EXPECT_MSG("cdp-test: --buffer: '2e9' is not a number in 0..1e9\n");

	/* half-open: the bound itself is refused, in the same one line */
	capture();
	CHECK_RC(cdp_cli_double("--momentum", "1", 0, 1, 1, &d), CDP_ERANGE);
	CHECK(d == 7, "*out changed");
	EXPECT_MSG("cdp-test: --momentum: '1' is not a number in 0..1, less than 1\n");
	capture();
	CHECK_RC(cdp_cli_double("--momentum", "abc", 0, 1, 1, &d), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: --momentum: 'abc' is not a number in 0..1, less than 1\n");
	capture();
	CHECK_RC(cdp_cli_double("--momentum", "0.9", 0, 1, 1, &d), CDP_OK);
	CHECK(d == 0.9, "got %g", d);
	EXPECT_MSG("");
}

static void test_sizes_lists(void)
{
	uint64_t u = 7;
	int v[3] = { 0, 0, 0 };
	size_t n = 9;

	capture();
	CHECK_RC(cdp_cli_size("--map-size", "512M", 1 << 16, (uint64_t)1 << 40, &u), CDP_OK);
	CHECK(u == (uint64_t)512 << 20, "got %llu", (unsigned long long)u);
	EXPECT_MSG("");
	capture();
	u = 7;
	CHECK_RC(cdp_cli_size("--map-size", "1K", 1 << 16, (uint64_t)1 << 40, &u), CDP_ERANGE);
	CHECK(u == 7, "*out changed");
	EXPECT_MSG("cdp-test: --map-size: '1K' is not a size like 64K, 512M or 2G in 64K..1T\n");
	/* the range stated even past any disk (a size above it said "at
	 * least 64K"), and a bound that no unit divides is in bytes */
	capture();
	CHECK_RC(cdp_cli_size("--txn-bytes", "2KB", 1000, CDP_CLI_SIZE_MAX, &u), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: --txn-bytes: '2KB' is not a size like 64K, 512M or 2G "
	           "in 1000..8388607T\n");
	capture();
	CHECK_RC(cdp_cli_size("--map-size", "9000000T", 1 << 16, CDP_CLI_SIZE_MAX, &u),
	         CDP_ERANGE);
	EXPECT_MSG("cdp-test: --map-size: '9000000T' is not a size like 64K, 512M or 2G "
	           "in 64K..8388607T\n");
	capture();
	CHECK_RC(cdp_cli_size("--map-size", "8388607T", 1 << 16, CDP_CLI_SIZE_MAX, &u), CDP_OK);
	EXPECT_MSG("");

	capture();
	CHECK_RC(cdp_cli_int_list("--bands", "3,1", 1, 9, v, 3, &n), CDP_OK);
	CHECK(n == 2 && v[0] == 3 && v[1] == 1, "got %zu: %d,%d", n, v[0], v[1]);
	EXPECT_MSG("");
	capture();
	n = 9;
	CHECK_RC(cdp_cli_int_list("--bands", "1,,2", 1, 9, v, 3, &n), CDP_ESYNTAX);
	CHECK(n == 9, "*n changed");
	EXPECT_MSG("cdp-test: --bands: '1,,2' is not a list like 1,2,3 of at most 3 "
	           "integers in 1..9\n");
	capture();
	CHECK_RC(cdp_cli_int_list("--bands", "1,2,3,4", 1, 9, v, 3, &n), CDP_ERANGE);
	EXPECT_MSG("cdp-test: --bands: '1,2,3,4' is not a list like 1,2,3 of at most 3 "
	           "integers in 1..9\n");
}

static void test_keywords(void)
{
	static const char *const three[] = { "shift", "pad", "drop", NULL };
	static const char *const two[] = { "png", "tif", NULL };
	static const char *const one[] = { "only", NULL };
	int k = 7;

	capture();
	CHECK_RC(cdp_cli_keyword("--edge", "drop", three, &k), CDP_OK);
	CHECK(k == 2, "index %d", k);
	EXPECT_MSG("");
	capture();
	k = 7;
	CHECK_RC(cdp_cli_keyword("--edge", "Drop", three, &k), CDP_ESYNTAX);
	CHECK(k == 7, "*out changed");
	EXPECT_MSG("cdp-test: --edge: 'Drop' is not shift, pad or drop\n");
	capture();
	CHECK_RC(cdp_cli_keyword("--format", "jpg", two, &k), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: --format: 'jpg' is not png or tif\n");
	capture();
	CHECK_RC(cdp_cli_keyword("--x", "", one, &k), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: --x: '' is not only\n");
	capture();
	CHECK_RC(cdp_cli_bad("--sync", "admm:3", "allreduce, average:K or admm:K:RHO"),
	         CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: --sync: 'admm:3' is not allreduce, average:K or admm:K:RHO\n");
}

static const struct option longopts[] = {
	{ "help",    no_argument,       NULL, 'h' },
	{ "size",    required_argument, NULL, 's' },
	{ "val",     required_argument, NULL, 256 },
	{ "val-by",  required_argument, NULL, 257 },
	{ "val-out", required_argument, NULL, 258 },
	{ NULL, 0, NULL, 0 }
};

/* Runs the wrapper over argv until it ends or refuses; returns the last
 * value, with the options seen in seen[]. */
static int run_getopt(char **argv, char *seen, size_t cap)
{
	int argc = 0, c, n = 0;

	while (argv[argc])
		argc++;
	optind = 0;   /* glibc: start over */
	while ((c = cdp_cli_getopt(argc, argv, "hs:", longopts)) != -1) {
		if ((size_t)n + 1 < cap)
			seen[n++] = c >= 256 ? (char)('0' + c - 256) : (char)c;
		if (c == '?')
			break;
	}
	seen[n] = '\0';
	return c;
}

/* stderr goes to a file around each run: getopt itself must print nothing */
static char errpath[] = "/tmp/cdp_test_cli.XXXXXX";
static int errfd = -1, savedfd = -1;

static void stderr_off(void)
{
	if (errfd < 0 && (errfd = mkstemp(errpath)) >= 0)
		unlink(errpath);
	fflush(stderr);
	if (errfd < 0 || ftruncate(errfd, 0) != 0 || lseek(errfd, 0, SEEK_SET) != 0 ||
	    (savedfd = dup(2)) < 0 || dup2(errfd, 2) < 0) {
		perror("stderr redirect");
		exit(99);
	}
}

/* Back on; the bytes written to stderr meanwhile. */
static off_t stderr_on(void)
{
	off_t n;

	fflush(stderr);
	n = lseek(errfd, 0, SEEK_CUR);
	dup2(savedfd, 2);
	close(savedfd);
	return n;
}

#define GETOPT(want_ret, want_seen, want_msg, ...) do { \
	char *argv_[] = { "./path/cdp-test", __VA_ARGS__, NULL }; \
	char seen_[16]; \
	int ret_; \
	off_t leak_; \
	capture(); \
	stderr_off(); \
	ret_ = run_getopt(argv_, seen_, sizeof seen_); \
	leak_ = stderr_on(); \
	CHECK(leak_ == 0, "getopt wrote %lld bytes to stderr", (long long)leak_); \
	CHECK(ret_ == (want_ret), "returned %d, want %d", ret_, want_ret); \
	CHECK(strcmp(seen_, want_seen) == 0, "options '%s', want '%s'", seen_, want_seen); \
	EXPECT_MSG(want_msg); \
} while (0)

static void test_getopt(void)
{
	GETOPT(-1, "hs1", "", "-h", "--size", "4", "--val-by=a");
	/* an unambiguous prefix and an exact name that prefixes others */
	GETOPT(-1, "s0", "", "--si=4", "--val", "0.1");
	/* permuted: operands first */
	GETOPT(-1, "s", "", "file", "-s4");
	GETOPT('?', "?", "cdp-test: unknown option '--bogus' (cdp-test --help lists the "
	       "options)\n", "--bogus");
	GETOPT('?', "?", "cdp-test: unknown option '--bogus' (cdp-test --help lists the "
	       "options)\n", "--bogus=1");
	GETOPT('?', "h?", "cdp-test: unknown option '-x' (cdp-test --help lists the "
	       "options)\n", "-hx");
	/* the bad letter inside a cluster, after a good long option */
	GETOPT('?', "h?", "cdp-test: unknown option '-x' (cdp-test --help lists the "
	       "options)\n", "--help", "-xh");
	GETOPT('?', "?", "cdp-test: ambiguous option '--val-' (cdp-test --help lists the "
	       "options)\n", "--val-", "x");
	GETOPT('?', "?", "cdp-test: option '--size' needs an argument\n", "--size");
	GETOPT('?', "h?", "cdp-test: option '-s' needs an argument\n", "-hs");
	GETOPT('?', "?", "cdp-test: option '--help' takes no argument\n", "--help=yes");
	/* an option's argument that is another option: getopt_long would hand
	 * "--help" over as the file name and drop the option */
	GETOPT('?', "?", "cdp-test: option '--size' needs an argument, and '--help' is an option "
	       "(write './--help' for a file of that name)\n", "--size", "--help");
	GETOPT('?', "h?", "cdp-test: option '--val-by' needs an argument, and '-h' is an option "
	       "(write './-h' for a file of that name)\n", "-h", "--val-by", "-h");
	GETOPT('?', "?", "cdp-test: option '-s' needs an argument, and '--val-o' is an option "
	       "(write './--val-o' for a file of that name)\n", "-s", "--val-o");
	GETOPT('?', "?", "cdp-test: option '-s' needs an argument, and '--val-' is an option "
	       "(write './--val-' for a file of that name)\n", "-s", "--val-");
	/* ... but not an attached one, "-", a number, "--", or a word that is
	 * no option of the program's */
	GETOPT(-1, "1s", "", "--val-by=--help", "-s--help");
	GETOPT(-1, "s0", "", "-s", "-", "--val", "-1");
	GETOPT(-1, "01", "", "--val", "--", "--val-by", "--nonesuch");
	GETOPT(-1, "2", "", "--val-out", "-x");

	if (errfd >= 0)
		close(errfd);
}

static void test_version(void)
{
	char *out = NULL, want[128];
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	cdp_cli_init("cdp-test", NULL);
	CHECK(strcmp(cdp_cli_prog(), "cdp-test") == 0, "prog '%s'", cdp_cli_prog());
	CHECK_RC(cdp_cli_version(f, "GDAL: 3.6.2", "CUDA: not built\nOpenBLAS: 0.3.21",
	                         (const char *)NULL), 0);
	snprintf(want, sizeof want, "cdp-test (cdpool) %s\nGDAL: 3.6.2\nCUDA: not built\n"
	         "OpenBLAS: 0.3.21\n", PACKAGE_VERSION);
	CHECK(out && strcmp(out, want) == 0, "version '%s', want '%s'", out ? out : "", want);
	free(out);

	/* a full disk under stdout: a failure with its reason, not silence
	 * (the version and the usage alike, each closing its stream) */
	f = fopen("/dev/full", "w");
	if (f) {
		capture();
		CHECK_RC(cdp_cli_version(f, (const char *)NULL), -1);
		EXPECT_MSG("cdp-test: write error: No space left on device\n");
	}
	f = fopen("/dev/full", "w");
	if (f) {
		capture();
		fputs("usage: cdp-test\n", f);
		CHECK_RC(cdp_cli_close(f), -1);
		EXPECT_MSG("cdp-test: write error: No space left on device\n");
	}
}

/* File names, comma lists, operands and environment values: one line each */
static void test_operands(void)
{
	static const char *const two[] = { "MODEL", "RASTER", NULL }, *const none[] = { NULL };
	char *ops[] = { "run", "a.tif", "extra" };

	capture();
	CHECK_RC(cdp_cli_file("--val-out", "v.keys"), CDP_OK);
	EXPECT_MSG("");
	capture();
	CHECK_RC(cdp_cli_file("--val-out", ""), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: --val-out: an empty file name\n");

	capture();
	CHECK_RC(cdp_cli_list("--time", "a.tif,b.tif", 2, "two dates"), CDP_OK);
	EXPECT_MSG("");
	for (const char *const *b = (const char *const[]){ "a.tif,", ",a.tif,b", "a,,b", "a.tif",
	                                                     "", NULL }; *b; b++) {
		char want[128];
		capture();
		CHECK_RC(cdp_cli_list("--time", *b, 2, "two dates"), CDP_ESYNTAX);
		snprintf(want, sizeof want, "cdp-test: --time: '%s' is not two dates\n", *b);
		EXPECT_MSG(want);
	}
	capture();
	CHECK_RC(cdp_cli_list("--freeze", "conv0", 1, "patterns"), CDP_OK);
	EXPECT_MSG("");

	capture();
	CHECK_RC(cdp_cli_operands(2, ops, two), CDP_OK);
	EXPECT_MSG("");
	capture();
	CHECK_RC(cdp_cli_operands(3, ops, two), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: extra operand 'extra'\n");
	capture();
	CHECK_RC(cdp_cli_operands(0, ops, two), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: missing MODEL and RASTER\n");
	capture();
	CHECK_RC(cdp_cli_operands(1, ops, two), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: missing RASTER\n");
	capture();
	CHECK_RC(cdp_cli_operands(1, ops, none), CDP_ESYNTAX);
	EXPECT_MSG("cdp-test: extra operand 'run'\n");

	setenv("CDP_TEST_ENV", "a\nb\x7f", 1);
	capture();
	cdp_cli_env_bad("CDP_TEST_ENV", "seconds", NULL);
	EXPECT_MSG("cdp-test: CDP_TEST_ENV: 'a?b?': want seconds\n");
	unsetenv("CDP_TEST_ENV");
}

int main(void)
{
	test_numbers();
	test_sizes_lists();
	test_keywords();
	test_getopt();
	test_version();
	test_operands();
	free(msg);
	return tap_done();
}
