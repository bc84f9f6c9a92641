/* cdp_cli.c: option parsing and messages shared by the programs (cdp_cli.h).
 *
 * The numbers are cdp_num.c's; this file adds the one message each error
 * gets, and the getopt_long wrapper that replaces getopt's own messages
 * (which name the program by the path it was run as) with ours.
 */
#include "config.h"

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_num.h"
#include "cdp_thread.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <unistd.h>

static const char *prog = "cdp";
static FILE *errf;

/* The marker blas_preinit adds beside OPENBLAS_NUM_THREADS=1, so that the
 * re-executed program knows the 1 is ours, not the user's */
#define BLAS_MARK "CDP_OPENBLAS_REEXEC=1"

/* OpenBLAS (linked directly, or through GDAL's LAPACK) starts its worker
 * threads in its library constructor, and in the OpenBLAS of Debian 12
 * (0.3.21) each worker first allocates a 128 MiB buffer, retrying for
 * ever when that fails: under an address-space limit (ulimit -v, a batch
 * system's memory limit) the workers spin at 100% CPU and exit() waits for
 * them in pthread_join, so even --version never ends. The programs need no
 * OpenBLAS thread (cdp-train's own pool calls it single-threaded), and with
 * OPENBLAS_NUM_THREADS=1 none is started; but by main, or any constructor
 * of ours, the workers exist. So this runs from .preinit_array, before any
 * library's constructor: when an address-space limit is in force and the
 * user has not set OPENBLAS_NUM_THREADS, it executes the program again
 * with OPENBLAS_NUM_THREADS=1 (setenv cannot be used here: libc's own
 * start-up resets the environment after it). Nothing else has run yet,
 * so the second start is the first one's twin. */
#ifdef __GLIBC__       /* glibc passes argc, argv and envp to these */
static void blas_preinit(int argc, char **argv, char **envp)
{
	struct rlimit rl;
	size_t n = 0;

	(void)argc;
	if (!argv || !envp || getauxval(AT_SECURE) ||
	    getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	for (; envp[n]; n++)
		if (strncmp(envp[n], "OPENBLAS_NUM_THREADS=", 21) == 0 ||
		    strcmp(envp[n], BLAS_MARK) == 0)
			return;
	if (n > 8192)           /* the copy below lives on the stack */
		return;
	{
		char *env[n + 3];

		memcpy(env, envp, n * sizeof *env);
		env[n] = "OPENBLAS_NUM_THREADS=1";
		env[n + 1] = BLAS_MARK;
		env[n + 2] = NULL;
		execve("/proc/self/exe", argv, env);
	}
	/* no /proc: go on as before */
}
__attribute__((section(".preinit_array"), used))
static void (*const blas_preinit_p)(int, char **, char **) = blas_preinit;
#endif

void cdp_cli_std_fds(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		int k;

		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			continue;
		/* the lowest free descriptor: fd itself, those below it open */
		if ((k = open("/dev/null", O_RDONLY)) < 0)
			continue;
		if (k != fd) {
			dup2(k, fd);
			close(k);
		}
	}
}

void cdp_cli_init(const char *name, FILE *err)
{
	/* blas_preinit's variables, read by OpenBLAS already, are not passed on
	 * to what the program starts */
	if (getenv("CDP_OPENBLAS_REEXEC")) {
		cdp_thread_blas_forced();
		unsetenv("CDP_OPENBLAS_REEXEC");
		unsetenv("OPENBLAS_NUM_THREADS");
	}
	/* a write over ulimit -f fails with EFBIG ("File too large"), which
	 * the programs report and clean up after, instead of killing them */
	signal(SIGXFSZ, SIG_IGN);
	cdp_cli_std_fds();
	prog = name ? name : "cdp";
	errf = err;
}

const char *cdp_cli_prog(void)
{
	return prog;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	FILE *f = errf ? errf : stderr;
	va_list ap;

	fprintf(f, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fflush(f);
}

/* The long option the user typed in arg ("--name" or "--name=value"):
 * its entry, or NULL when none or several match (getopt_long accepts any
 * unambiguous prefix). *ambiguous tells the two apart. */
static const struct option *find_long(const char *arg, const struct option *lo,
                                      int *ambiguous)
{
	const struct option *hit = NULL;
	size_t len = strcspn(arg + 2, "=");
	int n = 0;

	*ambiguous = 0;
	for (; lo && lo->name; lo++) {
		if (strncmp(lo->name, arg + 2, len) != 0)
			continue;
		if (strlen(lo->name) == len)
			return lo;
		hit = lo;
		n++;
	}
	*ambiguous = n > 1;
	return n == 1 ? hit : NULL;
}

/* Whether option c took the next element as its argument when that element
 * is one of the program's own options ("--trace --pad-last", "--out -q"):
 * getopt_long hands it over as the argument, and the run would then write
 * a file named "--pad-last" and drop the option. That is never what was
 * meant, so it is refused with the way to mean it. An argument attached to
 * its option ("--out=--x", "-o--x") is the user's explicit choice and
 * passes, as does "-" (standard input or output). */
static int swallowed(int c, int argc, char *const argv[], const char *shortopts,
                     const struct option *longopts)
{
	char letter[3] = { '-', (char)c, '\0' };
	const char *el;
	int amb;

	if (optarg == NULL || optind < 2 || optind > argc || optarg != argv[optind - 1] ||
	    optarg[0] != '-')
		return 0;
	if (optarg[1] == '-') {
		if (optarg[2] == '\0' || (find_long(optarg, longopts, &amb) == NULL && !amb))
			return 0;
	} else if (!isalpha((unsigned char)optarg[1]) || strchr(shortopts, optarg[1]) == NULL) {
		return 0;
	}
	/* the option as typed: "--trace" (a separate element, so no '='), or
	 * the letter of "-o" or of a cluster "-qo" */
	el = argv[optind - 2];
	say("option '%s' needs an argument, and '%s' is an option (write './%s' for a file of "
	    "that name)", strncmp(el, "--", 2) == 0 ? el : letter, optarg, optarg);
	return 1;
}

int cdp_cli_getopt(int argc, char *const argv[], const char *shortopts,
                   const struct option *longopts)
{
	char opts[256];
	const struct option *lo;
	const char *el;
	int c, amb = 0;

	/* a leading ':' makes a missing argument ':' rather than '?' */
	if (snprintf(opts, sizeof opts, ":%s", shortopts) >= (int)sizeof opts)
		return '?';
	opterr = 0;
	optopt = 0;
	c = getopt_long(argc, argv, opts, longopts, NULL);
	if (c != '?' && c != ':')
		return swallowed(c, argc, argv, shortopts, longopts) ? '?' : c;
	/* getopt_long steps past a long option it refuses, so argv[optind-1]
	 * is that option; a short one is named by optopt. */
	el = optind > 0 && optind <= argc ? argv[optind - 1] : "";
	/* optopt is 0 for an unknown long option and the option's value for a
	 * known one misused; a bad "-x" inside "-xq" leaves optind on its
	 * element, so el may be an earlier, good option: check it is this one */
	lo = strncmp(el, "--", 2) == 0 ? find_long(el, longopts, &amb) : NULL;
	if (lo && lo->flag == NULL && lo->val == optopt && optopt != 0) {
		int len = (int)strcspn(el, "=");

		if (c == ':')
			say("option '%.*s' needs an argument", len, el);
		else
			say("option '%.*s' takes no argument", len, el);
	} else if (strncmp(el, "--", 2) == 0 && optopt == 0) {
		say("%s option '%.*s' (%s --help lists the options)", amb ? "ambiguous" : "unknown",
		    (int)strcspn(el, "="), el, prog);
	} else if (c == ':') {
		say("option '-%c' needs an argument", optopt);
	} else if (optopt > ' ' && optopt < 127) {
		say("unknown option '-%c' (%s --help lists the options)", optopt, prog);
	} else {
		say("unknown option (%s --help lists the options)", prog);
	}
	return '?';
}

int cdp_cli_bad(const char *opt, const char *arg, const char *want)
{
	say("%s: '%s' is not %s", opt, arg, want);
	return CDP_ESYNTAX;
}

/* rc from a cdp_num parser: CDP_OK, or the message and rc. */
static int report(int rc, const char *opt, const char *arg, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int report(int rc, const char *opt, const char *arg, const char *fmt, ...)
{
	char want[256];
	va_list ap;

	if (rc == CDP_OK)
		return rc;
	va_start(ap, fmt);
	vsnprintf(want, sizeof want, fmt, ap);
	va_end(ap);
	if (rc == CDP_ENOMEM)
		say("%s: %s", opt, cdp_strerror(rc));
	else
		say("%s: '%s' is not %s", opt, arg, want);
	return rc;
}

int cdp_cli_int(const char *opt, const char *arg, int min, int max, int *out)
{
	return report(cdp_parse_int(arg, min, max, out), opt, arg,
	              "an integer in %d..%d", min, max);
}

int cdp_cli_long(const char *opt, const char *arg, long min, long max, long *out)
{
	int64_t v;
	int rc = cdp_parse_i64(arg, min, max, &v);

	if (rc == CDP_OK)
		*out = (long)v;
	return report(rc, opt, arg, "an integer in %ld..%ld", min, max);
}

int cdp_cli_u64(const char *opt, const char *arg, uint64_t min, uint64_t max,
                uint64_t *out)
{
	return report(cdp_parse_u64(arg, min, max, out), opt, arg,
	              "an integer in %llu..%llu", (unsigned long long)min,
	              (unsigned long long)max);
}

int cdp_cli_double(const char *opt, const char *arg, double min, double max,
                   int below_max, double *out)
{
	double v;
	int rc = cdp_parse_double(arg, min, max, &v);
	char lo[32], hi[32];

	if (rc == CDP_OK && below_max && v >= max)
		rc = CDP_ERANGE;
	if (rc == CDP_OK)
		*out = v;
	/* bounds as the man pages write them: 1e6, not %g's 1e+06 */
	cdp_double_str(min, lo, sizeof lo);
	cdp_double_str(max, hi, sizeof hi);
	if (below_max)
		return report(rc, opt, arg, "a number in %s..%s, less than %s", lo, hi, hi);
	return report(rc, opt, arg, "a number in %s..%s", lo, hi);
}

/* A size bound in the largest of K, M, G, T that divides it: "64K". */
static void size_text(uint64_t v, char *buf, size_t cap)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, "%llu%.*s", (unsigned long long)v, u >= 0, u >= 0 ? units + u : "");
}

int cdp_cli_size(const char *opt, const char *arg, uint64_t min, uint64_t max,
                 uint64_t *out)
{
	char lo[32], hi[32];

	size_text(min, lo, sizeof lo);
	size_text(max, hi, sizeof hi);
	return report(cdp_parse_size(arg, min, max, out), opt, arg,
	              "a size like 64K, 512M or 2G in %s..%s", lo, hi);
}

int cdp_cli_int_list(const char *opt, const char *arg, int min, int max, int *out,
                     size_t cap, size_t *n)
{
	int rc = cdp_parse_int_list(arg, min, max, out, cap, n);

	if (rc == CDP_OK && *n == 0)
		rc = CDP_ESYNTAX;
	return report(rc, opt, arg, "a list like 1,2,3 of at most %zu integers in %d..%d",
	              cap, min, max);
}

int cdp_cli_keyword(const char *opt, const char *arg, const char *const *words,
                    int *out)
{
	char want[256];
	size_t len = 0;
	int n = 0;

	for (int i = 0; words[i]; i++) {
		if (strcmp(arg, words[i]) == 0) {
			*out = i;
			return CDP_OK;
		}
		n++;
	}
	want[0] = '\0';
	for (int i = 0; i < n && len < sizeof want; i++)
		len += (size_t)snprintf(want + len, sizeof want - len, "%s%s",
		                        i == 0 ? "" : i == n - 1 ? " or " : ", ", words[i]);
	return cdp_cli_bad(opt, arg, want);
}

int cdp_cli_file(const char *opt, const char *arg)
{
	if (arg && *arg)
		return CDP_OK;
	say("%s: an empty file name", opt);
	return CDP_ESYNTAX;
}

int cdp_cli_list(const char *opt, const char *arg, size_t min, const char *want)
{
	size_t n = 1;
	int empty = !*arg;

	for (const char *p = arg; *p; p++)
		if (*p == ',') {
			n++;
			empty |= p == arg || p[1] == ',' || p[1] == '\0';
		}
	return empty || n < min ? cdp_cli_bad(opt, arg, want) : CDP_OK;
}

int cdp_cli_operands(int n, char *const *ops, const char *const *names)
{
	char miss[256];
	size_t len = 0;
	int want = 0;

	while (names[want])
		want++;
	if (n > want) {
		say("extra operand '%s'", ops[want]);
		return CDP_ESYNTAX;
	}
	if (n == want)
		return CDP_OK;
	miss[0] = '\0';
	for (int i = n; i < want && len < sizeof miss; i++)
		len += (size_t)snprintf(miss + len, sizeof miss - len, "%s%s", i > n ? " and " : "",
		                        names[i]);
	say("missing %s", miss);
	return CDP_ESYNTAX;
}

void cdp_cli_env_bad(const char *name, const char *want, const char *why)
{
	FILE *f = errf ? errf : stderr;
	const char *v = getenv(name);

	fprintf(f, "%s: %s: '", prog, name);
	for (; v && *v; v++)
		fputc((unsigned char)*v < 0x20 || *v == 0x7f ? '?' : *v, f);
	fprintf(f, "': %s%s\n", want ? "want " : "", want ? want : why ? why : "invalid");
	fflush(f);
}

int cdp_cli_close(FILE *out)
{
	int e = 0;

	/* a failed fflush drops the buffer: its errno is the one reason */
	if (fflush(out) != 0)
		e = errno ? errno : EIO;
	else if (ferror(out))
		e = EIO;
	if (fclose(out) != 0 && !e)
		e = errno ? errno : EIO;
	if (!e)
		return 0;
	say("write error: %s", strerror(e));
	return -1;
}

int cdp_cli_version(FILE *out, ...)
{
	const char *s;
	va_list ap;

	fprintf(out, "%s (%s) %s\n", prog, PACKAGE_NAME, PACKAGE_VERSION);
	va_start(ap, out);
	while ((s = va_arg(ap, const char *)) != NULL)
		fprintf(out, "%s\n", s);
	va_end(ap);
	return cdp_cli_close(out);
}
