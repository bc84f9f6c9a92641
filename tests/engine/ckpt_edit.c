/* ckpt_edit.c: rewrites a checkpoint through the checkpoint API, so a test
 * gets a file that every reader's CRC and size checks accept but whose
 * content is hostile or inconsistent (cdp-checkpoint(5): such a file is
 * refused with an error, never half-read).
 *
 * usage: ckpt_edit [-c CFG] [-n NAME,...] [-T N] [-p N] IN OUT
 *
 *   -c CFG      the CFG chunk's text becomes the file CFG's (its overrides
 *               are kept): a cfg nested 60,000 '(' deep, say
 *   -n NAMES    the class names become the comma-separated NAMES (6 names
 *               for a 5-class net, say)
 *   -T N        the TASK chunk says regression of N targets (target t of
 *               mean t, std 1): targets other than the net's outputs, or a
 *               classifier recorded as a regression net
 *   -p N        META's data position becomes N samples into the epoch
 *               (past the epoch's end, say)
 *
 * Exit 0, 1 when a file cannot be read or written, 2 on a usage error.
 */
#include "ckpt/checkpoint.h"
#include "cdp_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (s = malloc((size_t)n + 1)) != NULL) {
		if (fread(s, 1, (size_t)n, f) != (size_t)n) {
			free(s);
			s = NULL;
		} else {
			s[n] = '\0';
		}
	}
	fclose(f);
	return s;
}

int main(int argc, char **argv)
{
	const char *cfg = NULL, *names = NULL;
	cdp_ckpt ck;
	char *text = NULL, *list = NULL, *nv[256];
	double tmean[64], tstd[64];
	int c, rc = 1, n = 0, targets = 0;
	const char *pos = NULL;

	while ((c = getopt(argc, argv, "c:n:T:p:")) != -1) {
		if (c == 'c')
			cfg = optarg;
		else if (c == 'n')
			names = optarg;
		else if (c == 'T')
			targets = atoi(optarg);
		else if (c == 'p')
			pos = optarg;
		else
			goto usage;
	}
	if (targets < 0 || targets > 64)
		goto usage;
	if (argc - optind != 2)
		goto usage;
	memset(&ck, 0, sizeof ck);
	if ((c = cdp_ckpt_read(argv[optind], &ck)) != 0) {
		fprintf(stderr, "ckpt_edit: cannot read '%s': %s\n", argv[optind], cdp_strerror(c));
		return 1;
	}
	if (cfg && (!(text = slurp(cfg)) ||
	            cdp_ckpt_set_cfg(&ck, text, (const char *const *)ck.overrides,
	                             ck.noverrides) != 0)) {
		fprintf(stderr, "ckpt_edit: cannot set the cfg from '%s'\n", cfg);
		goto out;
	}
	if (names) {
		if (!(list = strdup(names)))
			goto out;
		for (char *save = NULL, *w = strtok_r(list, ",", &save); w && n < 256;
		     w = strtok_r(NULL, ",", &save))
			nv[n++] = w;
		if (cdp_ckpt_set_class_names(&ck, (const char *const *)nv, n) != 0) {
			fprintf(stderr, "ckpt_edit: bad class names '%s'\n", names);
			goto out;
		}
	}
	for (int t = 0; t < targets; t++) {
		tmean[t] = t;
		tstd[t] = 1;
	}
	if (targets && cdp_ckpt_set_task(&ck, CDP_CKPT_TASK_REGRESSION, tmean, tstd, targets) != 0) {
		fprintf(stderr, "ckpt_edit: cannot set %d targets\n", targets);
		goto out;
	}
	if (pos)
		ck.data_pos = strtoull(pos, NULL, 10);
	if ((c = cdp_ckpt_write(argv[optind + 1], &ck)) != 0) {
		fprintf(stderr, "ckpt_edit: cannot write '%s': %s\n", argv[optind + 1],
		        cdp_strerror(c));
		goto out;
	}
	rc = 0;
out:
	free(text);
	free(list);
	cdp_ckpt_free(&ck);
	return rc;
usage:
	fprintf(stderr, "usage: ckpt_edit [-c CFG] [-n NAME,...] [-T N] [-p N] IN OUT\n");
	return 2;
}
