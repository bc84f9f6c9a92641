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
	if (rc == CDP_OK && out->n > 0)   /* an empty folder: no array to sort (qsort's NULL) */
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

static int by_key(const void *a, const void *b)
{
	return strcmp((*(const list_entry *const *)a)->key, (*(const list_entry *const *)b)->key);
}

/* By STEM (what follows CLASS/), then key. */
static int by_stem(const void *a, const void *b)
{
	const char *x = (*(const list_entry *const *)a)->key, *y = (*(const list_entry *const *)b)->key;
	int c = strcmp(strchr(x, '/') + 1, strchr(y, '/') + 1);

	return c ? c : strcmp(x, y);
}

static int key_vs(const void *k, const void *e)
{
	return strcmp(k, (*(const list_entry *const *)e)->key);
}

static int stem_vs(const void *k, const void *e)
{
	return strcmp(k, strchr((*(const list_entry *const *)e)->key, '/') + 1);
}

/* 1 when the pool's class_names are the folders' (or absent). */
static int same_names(pk *p)
{
	char **v;
	size_t n;
	int same;

	if (cdp_pool_class_names(&p->pool, NULL, &v, &n) != CDP_OK)
		return 0;
	same = n == 0 || n == p->ncnames;
	for (size_t k = 0; same && k < n; k++)
		same = strcmp(v[k], p->cnames[k]) == 0;
	cdp_pool_class_names_free(v, n);
	return same;
}

int pack_folders_check_moved(pk *p, const list_entry *e, size_t n)
{
	const list_entry **keys = NULL, **stems = NULL, *const *hit;
	char key[CDP_LMDB_KEYMAX + 1];
	MDB_txn *txn = NULL;
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	int rc;

	/* Other classes: the first batch refuses them (meta.c), and a chip
	 * that only "moved" from a class of those says nothing. */
	if (n == 0 || !same_names(p))
		return CDP_OK;
	if (!(keys = malloc(n * sizeof *keys)) || !(stems = malloc(n * sizeof *stems))) {
		rc = pack_seterr(p, CDP_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		keys[i] = stems[i] = &e[i];
	qsort(keys, n, sizeof *keys, by_key);
	qsort(stems, n, sizeof *stems, by_stem);
	if ((rc = cdp_lmdb_txn_begin(p->pool.env, MDB_RDONLY, &txn)) ||
	    (rc = mdb_cursor_open(txn, p->pool.tiles, &cur))) {
		rc = pack_seterr(p, rc, "cannot read '%s': %s", p->o->db, cdp_strerror(rc));
		goto out;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		char *slash;

		if (k.mv_size >= sizeof key)
			continue;
		memcpy(key, k.mv_data, k.mv_size);
		key[k.mv_size] = '\0';
		/* a record the folders still hold, or not a CLASS/STEM key */
		if (!(slash = strchr(key, '/')) ||
		    bsearch(key, keys, n, sizeof *keys, key_vs))
			continue;
		if (!(hit = bsearch(slash + 1, stems, n, sizeof *stems, stem_vs)))
			continue;   /* a chip removed: its record stays, as documented */
		*slash = '\0';
		rc = pack_seterr(p, CDP_EMISMATCH, "'%s': chip '%s' is in class '%s' now, but the "
		                 "pool holds it as record '%s/%s' of class '%s', which no longer has "
		                 "it (pack the folders into a new pool)", p->in, (*hit)->image,
		                 p->cnames[(*hit)->cls], key, slash + 1, key);
		goto out;
	}
	rc = rc == MDB_NOTFOUND ? CDP_OK
	                        : pack_seterr(p, rc, "cannot read '%s': %s", p->o->db,
	                                      cdp_strerror(rc));
out:
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		mdb_txn_abort(txn);
	free(keys);
	free(stems);
	return rc;
}
