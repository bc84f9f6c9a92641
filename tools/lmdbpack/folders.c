/* folders.c: cdp-lmdbpack's --folders input (pack_int.h): the layout of
 * PyTorch's ImageFolder, DIR/CLASS/IMAGE.tif. The class names are the
 * subfolders of DIR in byte order (strcmp, as ImageFolder's sorted()), class
 * K the K-th of them; each image becomes a list entry of that class, keyed
 * CLASS/STEM (cdp_key.h) so that two classes may hold the same file name.
 * Only regular files ending in .tif or .tiff (any case) count; other files
 * and hidden entries are skipped, as ImageFolder skips what it cannot read.
 * The entries then take --list's path (pack_list_pack in list.c).
 */
#include "pack_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cdp_error.h"
#include "cdp_key.h"

typedef struct names {
	char **v;
	size_t n, cap;
} names;

static void names_free(names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_tif(const char *name)
{
	const char *dot = strrchr(name, '.');

	return dot && dot != name && (!strcasecmp(dot, ".tif") || !strcasecmp(dot, ".tiff"));
}

/* The entries of dir that are directories (want_dir) or .tif files, sorted. */
static int list_dir(pk *p, const char *dir, int want_dir, names *out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];
	struct stat st;
	int rc = CDP_OK;

	if (!d)
		return pack_seterr(p, errno, "cannot open '%s': %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (stat(path, &st) != 0) {
			rc = pack_seterr(p, errno, "cannot open '%s': %s", path, strerror(errno));
			break;
		}
		if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode) || !is_tif(e->d_name))
			continue;
		if (out->n == out->cap) {
			size_t nc = out->cap ? out->cap * 2 : 64;
			char **nv = realloc(out->v, nc * sizeof *nv);
			if (!nv) {
				rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
				break;
			}
			out->v = nv;
			out->cap = nc;
		}
		if (!(out->v[out->n] = strdup(e->d_name))) {
			rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
			break;
		}
		out->n++;
	}
	closedir(d);
	if (rc == CDP_OK)
		qsort(out->v, out->n, sizeof *out->v, cmp_str);
	return rc;
}

int pack_folders_read(pk *p, list_entry **out, size_t *nout)
{
	const char *dir = p->o->folders;
	names cls = { 0 }, files = { 0 };
	list_entry *e = NULL;
	size_t n = 0, cap = 0;
	char path[4096];
	int rc;

	*out = NULL;
	*nout = 0;
	if ((rc = list_dir(p, dir, 1, &cls)))
		goto out;
	if (cls.n == 0) {
		rc = pack_seterr(p, CDP_ESYNTAX, "'%s': no class folders", dir);
		goto out;
	}
	if (cls.n > CDP_CLASS_MAX) {
		rc = pack_seterr(p, CDP_ERANGE, "'%s': %zu class folders, more than %u", dir,
		                 cls.n, (unsigned)CDP_CLASS_MAX);
		goto out;
	}
	for (size_t c = 0; c < cls.n && rc == CDP_OK; c++) {
		if (cdp_key_name_check(cls.v[c]) != CDP_OK) {
			rc = pack_seterr(p, CDP_EKEY, "'%s/%s': a class folder's name must be 1 to %d "
			                 "of A-Z a-z 0-9 . _ + -", dir, cls.v[c], CDP_NAME_MAX);
			break;
		}
		snprintf(path, sizeof path, "%s/%s", dir, cls.v[c]);
		names_free(&files);
		if ((rc = list_dir(p, path, 0, &files)))
			break;
		if (files.n == 0) {
			rc = pack_seterr(p, CDP_ESYNTAX, "'%s': no .tif files in class '%s'", path,
			                 cls.v[c]);
			break;
		}
		for (size_t i = 0; i < files.n; i++) {
			size_t len = strlen(path) + strlen(files.v[i]) + 2;
			if (n == cap) {
				list_entry *ne = realloc(e, (cap = cap ? cap * 2 : 256) * sizeof *ne);
				if (!ne) {
					rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
					break;
				}
				e = ne;
			}
			memset(&e[n], 0, sizeof e[n]);
			e[n].cls = (long)c;
			e[n].folder = 1;
			e[n].line = n + 1;
			if (!(e[n].image = malloc(len))) {
				rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
				break;
			}
			snprintf(e[n++].image, len, "%s/%s", path, files.v[i]);
		}
	}
	if (rc == CDP_OK) {
		/* the class names, kept for the class_names meta and the keys */
		p->cnames = (const char *const *)cls.v;
		p->ncnames = cls.n;
		p->cnames_own = cls.v;
		cls.v = NULL;
		cls.n = 0;
	}
out:
	names_free(&cls);
	names_free(&files);
	if (rc) {
		pack_list_free(e, n);
		e = NULL;
		n = 0;
	}
	*out = e;
	*nout = n;
	return rc;
}
