/* cdp-lmdbpack: pack a record stream (or a list or folders of chips) into a pool.
 *
 * This file only turns the command line into cdp_pack_opts, runs
 * cdp_pack_run() (pack.c) and reports the outcome; see man/cdp-lmdbpack.1.
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp_cli.h"
#include "cdp_error.h"
#include "cdp_lmdb.h"
#include "cdp_progress.h"
#include "cdp_raster.h"
#include "cdp_stats.h"
#include "pack.h"

#define MAXCLASSES 4096

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: cdp-lmdbpack [-hqV] [--classes name[,name...]] [--map-size size]\n"
	    "                    [--no-sync] [--progress] [--replace | --resume]\n"
	    "                    [--txn-bytes size] [--txn-records n] db < stream\n"
	    "       cdp-lmdbpack [-hqV] [--classes name[,name...]] [--ignore value]\n"
	    "                    [--map-size size] [--no-sync] [--progress]\n"
	    "                    [--replace | --resume] [--txn-bytes size]\n"
	    "                    [--txn-records n] [-z level] --list file db\n"
	    "       cdp-lmdbpack [-hqV] [--map-size size] [--no-sync] [--progress]\n"
	    "                    [--replace | --resume] [--txn-bytes size]\n"
	    "                    [--txn-records n] [-z level] --folders dir db\n"
	    "       cdp-lmdbpack [-hqV] [--map-size size] [--no-sync] [--progress]\n"
	    "                    [--replace | --resume] [--txn-bytes size]\n"
	    "                    [--txn-records n] [-z level] --multi-label\n"
	    "                    --classes name[,name...] --list file db\n");
}

/* name for a one-line message: bytes outside printable ASCII as \xNN, at
 * most 40 of its bytes, then "...". */
static void show_name(const char *name, char out[200])
{
	size_t o = 0, i;

	for (i = 0; name[i] && i < 40; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
	}
	snprintf(out + o, 200 - o, "%s", name[i] ? "..." : "");
}

/* The checkpoint's rules for class names (cdp_class_name_ok), applied when
 * they enter the pool: cdp-train would drop them all for one bad name, and
 * a name given twice makes the class of that name ambiguous. */
static int check_classes(const char *const *names, size_t n)
{
	char why[128], shown[200];

	for (size_t k = 0; k < n; k++) {
		show_name(names[k], shown);
		if (!cdp_class_name_ok(names[k], why, sizeof why)) {
			fprintf(stderr, "cdp-lmdbpack: --classes: class %zu's name '%s' %s\n", k,
			        shown, why);
			return CDP_ESYNTAX;
		}
		for (size_t j = 0; j < k; j++)
			if (strcmp(names[j], names[k]) == 0) {
				fprintf(stderr, "cdp-lmdbpack: --classes: '%s' names both class %zu "
				        "and class %zu\n", shown, j, k);
				return CDP_ESYNTAX;
			}
	}
	return CDP_OK;
}

/* The command line as one shell-quoted line for the pool's cmdline meta. */
static char *join_argv(int argc, char **argv)
{
	size_t n = 1;
	char *s, *q;

	for (int i = 0; i < argc; i++)
		n += 4 * strlen(argv[i]) + 3;
	if (!(s = malloc(n)))
		return NULL;
	q = s;
	for (int i = 0; i < argc; i++) {
		/* argv[0] as the program's name, not the path it was run by. */
		const char *a = i ? argv[i] : "cdp-lmdbpack";
		int plain = *a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                            "0123456789-_./=,:+%@") == strlen(a);
		if (i)
			*q++ = ' ';
		if (!plain)
			*q++ = '\'';
		for (; *a; a++) {
			if (*a == '\'') {
				memcpy(q, "'\\''", 4);
				q += 4;
			} else {
				*q++ = *a == '\n' ? ' ' : *a;
			}
		}
		if (!plain)
			*q++ = '\'';
	}
	*q = '\0';
	return s;
}

enum { OPT_CLASSES = 256, OPT_FOLDERS, OPT_IGNORE, OPT_LIST, OPT_MAP_SIZE, OPT_MULTI_LABEL,
       OPT_NO_SYNC, OPT_PROGRESS, OPT_REPLACE, OPT_RESUME, OPT_TXN_BYTES, OPT_TXN_RECORDS };

static const struct option longopts[] = {
	{ "classes",     required_argument, NULL, OPT_CLASSES },
	{ "folders",     required_argument, NULL, OPT_FOLDERS },
	{ "help",        no_argument,       NULL, 'h' },
	{ "ignore",      required_argument, NULL, OPT_IGNORE },
	{ "list",        required_argument, NULL, OPT_LIST },
	{ "map-size",    required_argument, NULL, OPT_MAP_SIZE },
	{ "multi-label", no_argument,       NULL, OPT_MULTI_LABEL },
	{ "no-sync",     no_argument,       NULL, OPT_NO_SYNC },
	{ "progress",    no_argument,       NULL, OPT_PROGRESS },
	{ "quiet",       no_argument,       NULL, 'q' },
	{ "replace",     no_argument,       NULL, OPT_REPLACE },
	{ "resume",      no_argument,       NULL, OPT_RESUME },
	{ "txn-bytes",   required_argument, NULL, OPT_TXN_BYTES },
	{ "txn-records", required_argument, NULL, OPT_TXN_RECORDS },
	{ "version",     no_argument,       NULL, 'V' },
	{ "zlib",        required_argument, NULL, 'z' },
	{ NULL, 0, NULL, 0 }
};

/* The terminating signal that stops the pack (0: none yet). */
static volatile sig_atomic_t stop;

/* The first signal asks the pack to stop (it cleans up: a first pack that
 * committed nothing removes its pool, as cdp-lmdbpack(1) promises); a second
 * one kills at once. */
static void on_signal(int sig)
{
	if (stop) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop = sig;
}

/* SIGHUP, SIGINT and SIGTERM, unless ignored (nohup, a background job):
 * without SA_RESTART, so a read blocked on the stream returns EINTR. */
static void catch_signals(void)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGTERM };
	struct sigaction sa, old;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
}

int main(int argc, char **argv)
{
	cdp_pack_opts o;
	cdp_pack_result res;
	const char *classes[MAXCLASSES];
	char *classbuf = NULL, *cmdline = NULL, err[1024];
	uint64_t u;
	int ch, quiet = 0, ret = 0, resume = 0, replace = 0, v, rc;

	cdp_pack_opts_init(&o);
	cdp_cli_init("cdp-lmdbpack", stderr);
	ret = 2;   /* until the options are read */
	while ((ch = cdp_cli_getopt(argc, argv, "hqVz:", longopts)) != -1) {
		switch (ch) {
		case 'h':
			usage(stdout);
			ret = cdp_cli_close(stdout) ? 1 : 0;
			goto out;
		case 'q':
			quiet = 1;
			o.progress = CDP_PROGRESS_OFF;
			break;
		case 'V':
			ret = cdp_cli_version(stdout, cdp_lmdb_version(), cdp_raster_version(),
			                      NULL) ? 1 : 0;
			goto out;
		case 'z':
			if (cdp_cli_int("--zlib", optarg, 1, 9, &o.zlevel))
				goto out;
			break;
		case OPT_CLASSES:
			free(classbuf);
			if (!(classbuf = strdup(optarg)))
				goto nomem;
			o.nclasses = 0;
			for (char *s = classbuf, *c; s; s = c) {
				if ((c = strchr(s, ',')))
					*c++ = '\0';
				if (!*s || o.nclasses == MAXCLASSES) {
					cdp_cli_bad("--classes", optarg, "a list of names like a,b,c");
					goto out;
				}
				classes[o.nclasses++] = s;
			}
			if (check_classes(classes, o.nclasses))
				goto out;
			o.classes = classes;
			break;
		case OPT_FOLDERS:
			o.folders = optarg;
			break;
		case OPT_IGNORE:
			if (cdp_cli_int("--ignore", optarg, 0, 65535, &v))
				goto out;
			o.has_ignore = 1;
			o.ignore = (uint32_t)v;
			break;
		case OPT_LIST:
			o.list = optarg;
			break;
		case OPT_MAP_SIZE:
			if (cdp_cli_size("--map-size", optarg, 1 << 16, CDP_CLI_SIZE_MAX, &u))
				goto out;
			o.map_size = (size_t)u;
			break;
		case OPT_MULTI_LABEL:
			o.multi_label = 1;
			break;
		case OPT_NO_SYNC:
			o.nosync = 1;
			break;
		case OPT_PROGRESS:
			o.progress = CDP_PROGRESS_ON;
			break;
		case OPT_REPLACE:
			replace = 1;
			o.dup = CDP_DUP_REPLACE;
			break;
		case OPT_RESUME:
			resume = 1;
			o.dup = CDP_DUP_SKIP;
			break;
		case OPT_TXN_BYTES:
			if (cdp_cli_size("--txn-bytes", optarg, 1, CDP_CLI_SIZE_MAX, &u))
				goto out;
			o.txn_bytes = (size_t)u;
			break;
		case OPT_TXN_RECORDS:
			if (cdp_cli_u64("--txn-records", optarg, 1, 100000000, &u))
				goto out;
			o.txn_records = (size_t)u;
			break;
		default:
			goto out;
		}
	}
	ret = 0;
	if (cdp_cli_operands(argc - optind, argv + optind, (const char *const[]){ "DB", NULL })) {
		usage(stderr);
		ret = 2;
		goto out;
	}
	o.db = argv[optind];
	if (resume && replace) {
		fprintf(stderr, "cdp-lmdbpack: --resume and --replace exclude each other\n");
		ret = 2;
		goto out;
	}
	/* a chip of ImageFolder's layout is in one class folder: one class */
	if (o.multi_label && (o.folders || !o.list || !o.nclasses || o.has_ignore)) {
		fprintf(stderr, "cdp-lmdbpack: --multi-label needs --list and --classes and "
		        "excludes --folders (a chip in one class folder has one class) and "
		        "--ignore\n");
		ret = 2;
		goto out;
	}
	/* a list line's set is one blank-free field, and cdp-predict joins a
	 * set's names by '|' */
	for (size_t k = 0; o.multi_label && k < o.nclasses; k++)
		if (strpbrk(classes[k], " \t|#")) {
			char shown[200];
			show_name(classes[k], shown);
			fprintf(stderr, "cdp-lmdbpack: --classes: class %zu's name '%s' holds a blank, "
			        "'|' or '#', which a multi-label list or CSV cannot tell apart\n", k, shown);
			ret = 2;
			goto out;
		}
	if (o.folders && (o.list || o.nclasses || o.has_ignore)) {
		fprintf(stderr, "cdp-lmdbpack: --folders excludes --list, --classes and --ignore\n");
		ret = 2;
		goto out;
	}
	/* a stream's --classes names its label values (cdp-tile's masks); its
	 * records come encoded, with cdp-tile's own ignore value and -z */
	if (!o.list && !o.folders && (o.has_ignore || o.zlevel)) {
		fprintf(stderr, "cdp-lmdbpack: %s\n", o.has_ignore ? "--ignore needs --list" :
		        "--zlib needs --list or --folders (a stream's records keep cdp-tile's -z)");
		ret = 2;
		goto out;
	}
	if (!(cmdline = join_argv(argc, argv)))
		goto nomem;
	o.cmdline = cmdline;

	/* A write error must come back as EPIPE or ENOSPC, never a signal. */
	signal(SIGPIPE, SIG_IGN);
	catch_signals();
	o.stop = &stop;
	rc = cdp_pack_run(&o, stdin, &res, err, sizeof err);
	if (rc != CDP_OK)
		fprintf(stderr, "cdp-lmdbpack: %s\n", err);
	if (stop) {
		/* cleaned up: now die of it, so the caller sees the signal */
		signal((int)stop, SIG_DFL);
		raise((int)stop);
	}
	if (rc != CDP_OK) {
		ret = 1;
		goto out;
	}
	/* warnings are not chatter: -q keeps them */
	for (const char *w = res.warn, *e; *w; w = e + 1) {
		e = strchr(w, '\n');
		fprintf(stderr, "cdp-lmdbpack: warning: %.*s\n", (int)(e - w), w);
	}
	if (!quiet)
		fprintf(stderr, "cdp-lmdbpack: %llu records written, %llu skipped, %.1f MB "
		        "in %.1f s (%.1f MB/s)\n", (unsigned long long)res.written,
		        (unsigned long long)res.skipped, res.bytes / 1e6, res.seconds,
		        res.seconds > 0 ? res.bytes / 1e6 / res.seconds : 0.0);
	goto out;
nomem:
	fprintf(stderr, "cdp-lmdbpack: %s\n", cdp_strerror(CDP_ENOMEM));
	ret = 1;
out:
	free(classbuf);
	free(cmdline);
	return ret;
}
