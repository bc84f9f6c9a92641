/* loader_sources.c: the pool sources of the loader's keys (loader.h,
 * cdp_loader_sources), what the per-source standardization, the target
 * statistics and the checkpoint's georeference are taken from.
 *
 * Every rank learns them at every start, so they are found without
 * reading every record: a key names its source. cdp-tile keys its tiles
 * NAME_ROW_COL under a source named NAME; cdp-lmdbpack --list and
 * --folders name each chip's source by its whole key (cdp-pool(5),
 * cdp-keys(5)). A key whose scene, or (a tile-form key, which may be a
 * chip whose stem looks like a tile) whose whole key, is the name of
 * exactly one source takes that source. A key matching no source or
 * several (two sources of one name, a chip "s_1_2" beside a scene "s") has
 * its record's header read. The headers open has read (resolve: a sample
 * of SHAPE_SAMPLE records, all of them in copy mode) check the mapping:
 * a pool whose records say otherwise (written by hand, or by a writer
 * that named its sources otherwise) has every header read, as before.
 */
#include "loader_int.h"

#include <stdlib.h>
#include <string.h>

#include "cdp_error.h"
#include "cdp_key.h"

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static int by_name(const void *a, const void *b)
{
	const cdp_source_name *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* The sources named name[len] among v[n] (sorted by name): 0, 1 (*idx
 * its index) or 2 for several. */
static int named(const cdp_source_name *v, size_t n, const char *name, size_t len,
                 uint32_t *idx)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strncmp(v[mid].name, name, len);
		if (c == 0 && v[mid].name[len] != '\0')
			c = 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == n || strncmp(v[lo].name, name, len) != 0 || v[lo].name[len] != '\0')
		return 0;
	*idx = v[lo].index;
	return lo + 1 < n && strcmp(v[lo + 1].name, v[lo].name) == 0 ? 2 : 1;
}

/* Key i's source by its name: 1 with *idx, 0 when the key names no source
 * or several. */
static int key_source(const cdp_loader *l, const cdp_source_name *v, size_t n, size_t i,
                      uint32_t *idx)
{
	char scene[CDP_KEY_MAX];
	uint32_t a = 0, b = 0;
	int kind, ma, mb = 0;

	if (n == 1) {           /* every record is of the pool's one source */
		*idx = v[0].index;
		return 1;
	}
	kind = cdp_key_scene(l->kl.keys[i], l->kl.lens[i], scene, sizeof scene, NULL, NULL);
	if (kind != CDP_KEY_TILE && kind != CDP_KEY_CHIP)
		return 0;
	ma = named(v, n, scene, strlen(scene), &a);
	if (kind == CDP_KEY_TILE)
		mb = named(v, n, l->kl.keys[i], l->kl.lens[i], &b);
	if (ma + mb != 1)
		return 0;
	*idx = ma ? a : b;
	return 1;
}

int cdp_loader_sources(const cdp_loader *l, uint32_t **src, size_t *n, size_t *peeked)
{
	uint32_t *s = malloc((l->N ? l->N : 1) * sizeof *s), x;
	cdp_source_name *v = NULL;
	size_t k = 0, m = 0, nv = 0, np = 0;
	int by_names = 0, rc = CDP_OK;
	cdp_record r;

	*src = NULL;
	*n = 0;
	if (peeked)
		*peeked = 0;
	if (!s)
		return CDP_ENOMEM;
	if (l->nsample < l->N) {
		if ((rc = cdp_pool_source_names(l->pool, l->o.txn ? l->o.txn : l->txn, &v,
		                                 &nv)) != CDP_OK)
			goto out;
		qsort(v, nv, sizeof *v, by_name);
		/* a sampled record of another source than its key names: the
		 * names say nothing of this pool */
		by_names = nv > 0;
		for (size_t j = 0; by_names && j < l->nsample; j++)
			if (key_source(l, v, nv, l->sample_i[j], &x) && x != l->sample_src[j])
				by_names = 0;
	}
	/* open read every header (copy mode, a short list) or a sample */
	for (size_t i = 0, j = 0; i < l->N; i++) {
		if (j < l->nsample && l->sample_i[j] == i) {
			s[k++] = l->sample_src[j++];
		} else if (by_names && key_source(l, v, nv, i, &x)) {
			s[k++] = x;
		} else {
			np++;
			if (cdp_record_peek(l->val[i].mv_data, l->val[i].mv_size, &r) == CDP_OK)
				s[k++] = r.source;
		}
	}
	qsort(s, k, sizeof *s, by_u32);
	for (size_t i = 0; i < k; i++)
		if (m == 0 || s[i] != s[m - 1])
			s[m++] = s[i];
	if (peeked)
		*peeked = np;
out:
	cdp_pool_source_names_free(v, nv);
	if (rc) {
		free(s);
		return rc;
	}
	*src = s;
	*n = m;
	return CDP_OK;
}
