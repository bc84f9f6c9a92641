/* cdp_cli.h: the command line every cdp program shares.
 *
 * One style for every option error: one line on the stream given to
 * cdp_cli_init (stderr in the programs), the program's name first, then the
 * option, then the argument quoted and what it should have been:
 *
 *     cdp-tile: --size: '0' is not an integer in 1..65536
 *     cdp-tile: --edge: 'wrap' is not shift, pad or drop
 *     cdp-tile: unknown option '--bogus' (cdp-tile --help lists them)
 *     cdp-tile: option '--size' needs an argument
 *     cdp-train: option '--trace' needs an argument, and '--pad-last' is an
 *         option (write './--pad-last' for a file of that name)
 *
 * and the program exits 2. The parsers take the option's name as the user
 * spells it ("--size" also for -s) and wrap lib/cdp_num.h: they return
 * CDP_OK with *out set, or print the line and return the cdp_num code
 * (CDP_ESYNTAX, CDP_ERANGE; CDP_ENOMEM for a list that cannot be copied)
 * with *out untouched. A syntax error and a range error read alike, since
 * both tell the user what to type instead.
 *
 * Like cdp_progress.h, and unlike the rest of lib/, this module prints: its
 * only job is the messages of main.c. It never exits.
 */
#ifndef CDP_CLI_H
#define CDP_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

/* The program's name in messages (not copied) and the stream they go to
 * (NULL: stderr). Call once, first in main, before cdp_cli_getopt: it
 * calls cdp_cli_std_fds, and ignores SIGXFSZ, so that a write beyond
 * ulimit -f fails with EFBIG and is reported like any write error. */
void cdp_cli_init(const char *prog, FILE *err);

/* Descriptors 0, 1 and 2 that are closed (prog >&-) are opened on
 * /dev/null read-only, so that no file the program opens later becomes
 * its standard output (cdp-evaluate's raster took a closed fd 1 and the
 * report was refused as "standard output is 'p.tif'"), and a write to a
 * closed standard output or error still fails, with EBADF ("write error:
 * Bad file descriptor"), rather than vanishing into /dev/null. */
void cdp_cli_std_fds(void);
const char *cdp_cli_prog(void);

/* getopt_long with getopt's own messages off (opterr = 0, which would print
 * "./cdp-tile: unrecognized option"): an unknown, ambiguous or misused
 * option, or a missing argument, prints one line in the style above and
 * returns '?'. Otherwise as getopt_long (shortopts without a leading ':'). */
int cdp_cli_getopt(int argc, char *const argv[], const char *shortopts,
                   const struct option *longopts);

/* "PROG: OPT: 'ARG' is not WANT"; returns CDP_ESYNTAX, for the checks the
 * parsers below do not cover (WANT e.g. "allreduce, average:K or admm:K:RHO"). */
int cdp_cli_bad(const char *opt, const char *arg, const char *want);

/* Integers in [min, max]: "is not an integer in MIN..MAX". */
int cdp_cli_int(const char *opt, const char *arg, int min, int max, int *out);
int cdp_cli_long(const char *opt, const char *arg, long min, long max, long *out);
int cdp_cli_u64(const char *opt, const char *arg, uint64_t min, uint64_t max,
                uint64_t *out);
/* Decimal numbers in [min, max], or [min, max) when below_max: "is not a
 * number in MIN..MAX" (", less than MAX" for the half-open range). */
int cdp_cli_double(const char *opt, const char *arg, double min, double max,
                   int below_max, double *out);
/* Sizes with K, M, G, T suffixes (cdp_parse_size) in [min, max]: "is not a
 * size like 64K, 512M or 2G in MIN..MAX", bounds in the largest unit that
 * divides them. CDP_CLI_SIZE_MAX is the bound of a size with none of its
 * own: 8388607T, the largest in T below 2^63. */
#define CDP_CLI_SIZE_MAX ((uint64_t)8388607 << 40)
int cdp_cli_size(const char *opt, const char *arg, uint64_t min, uint64_t max,
                 uint64_t *out);
/* A comma list of at most cap integers in [min, max] (at least one):
 * "is not a list like 1,2,3 of integers in MIN..MAX". */
int cdp_cli_int_list(const char *opt, const char *arg, int min, int max, int *out,
                     size_t cap, size_t *n);
/* One of the NULL-terminated words: *out = its index, or "is not W1, W2 or
 * W3". Exact, case-sensitive match. */
int cdp_cli_keyword(const char *opt, const char *arg, const char *const *words,
                    int *out);

/* A file name given to opt: "PROG: OPT: an empty file name" for "" (no
 * file has it, and the messages of a later failure would name nothing). */
int cdp_cli_file(const char *opt, const char *arg);

/* A comma list of at least min items, none empty ("a,,b", "a,", ""):
 * "is not WANT". The items themselves are the caller's to check. */
int cdp_cli_list(const char *opt, const char *arg, size_t min, const char *want);

/* The n operands ops[] against the NULL-terminated names of those wanted
 * (MODEL, RASTER): "missing RASTER" (every name not given, joined by
 * " and "), or "extra operand 'X'" for the first one past them. CDP_OK or
 * CDP_ESYNTAX, after the line; the caller prints its usage next. */
int cdp_cli_operands(int n, char *const *ops, const char *const *names);

/* "PROG: NAME: 'VALUE': want WANT" (or ": WHY" without WANT) for an
 * environment variable, its value's control characters shown as '?' so
 * the message stays one line. */
void cdp_cli_env_bad(const char *name, const char *want, const char *why);

/* Flushes and closes out (stdout after --help): 0, or -1 after "PROG:
 * write error: REASON" when a write failed, there or at the close. */
int cdp_cli_close(FILE *out);

/* -V / --version on out: "PROG (cdpool) VERSION", then each of the
 * NULL-terminated feature strings (one or more "Name: value" lines each,
 * e.g. cdp_raster_version()) on lines of their own, then cdp_cli_close(out).
 * Returns 0, or -1 after the message when out cannot be written. */
int cdp_cli_version(FILE *out, ...) __attribute__((sentinel));

#endif
