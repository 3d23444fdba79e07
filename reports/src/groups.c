/* Finding groups (kvfuzz/groups.h): the findings of one or more directories, each read from its
 * .json, joined into distinct defects by a key that depends on the findings alone, so that the
 * directories of several campaigns merge. The rule is explained in docs/reports.md, "Finding
 * groups"; the key is built in finding_key(). */
#include "kvfuzz/groups.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvfuzz/case.h"
#include "kvfuzz/file.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/precision.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* A finding .json larger than this is not read (a campaign writes a few KiB). */
#define KVF__GROUP_JSON_MAX (4 << 20)

static int is_hex_word(const char *s, size_t n) {
    if (n < 4) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
              (s[i] >= 'A' && s[i] <= 'F')))
            return 0;
    return 1;
}

static char *join_path(const char *dir, const char *stem, const char *ext) {
    size_t n = strlen(dir) + strlen(stem) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, stem, ext);
    return p;
}

static char *str_member(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* The defining element                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* The row feature of an element: an empty sequence first, since every row of it is defined by
 * having no token (its lse is -inf, its o is 0), then a row whose exact value is not finite. */
static kvf_group_feature element_feature(const kvf_group_element *e) {
    if (e->seq_len == 0) return KVF_GROUP_ROW_EMPTY;
    if (!isfinite(e->exact)) return KVF_GROUP_ROW_MASKED;
    return KVF_GROUP_ROW_ORDINARY;
}

/* Whether a ranks before b as the element a finding is defined by: the rarer row feature first
 * (a case that holds an empty sequence fails there whatever else it holds), then lse before o
 * (a row's o is computed with its normaliser, so a wrong lse explains a wrong o on the same
 * row, never the reverse), then the larger excess margin and margin (the judge's own order). */
static int element_before(const kvf_group_element *a, const kvf_group_element *b) {
    kvf_group_feature fa = element_feature(a), fb = element_feature(b);
    if (fa != fb) return fa > fb;
    if (a->is_lse != b->is_lse) return a->is_lse;
    double ea = isnan(a->excess_margin) ? INFINITY : a->excess_margin;
    double eb = isnan(b->excess_margin) ? INFINITY : b->excess_margin;
    if (ea != eb) return ea > eb;
    return a->margin > b->margin;
}

static int read_element(const json_t *w, int is_lse, const json_t *seq_lens, kvf_group_element *e) {
    memset(e, 0, sizeof *e);
    e->is_lse = is_lse;
    double b = -1, h = -1, d = -1;
    if (kvf_json_to_double(json_object_get(w, "b"), &b) ||
        kvf_json_to_double(json_object_get(w, "h"), &h) ||
        kvf_json_to_double(json_object_get(w, "kernel"), &e->kernel) ||
        kvf_json_to_double(json_object_get(w, "oracle"), &e->rounded) ||
        kvf_json_to_double(json_object_get(w, "exact"), &e->exact))
        return -1;
    kvf_json_to_double(json_object_get(w, "d"), &d);
    kvf_json_to_double(json_object_get(w, "margin"), &e->margin);
    kvf_json_to_double(json_object_get(w, "excess_margin"), &e->excess_margin);
    e->b = (int64_t)b;
    e->h = (int64_t)h;
    e->d = (int64_t)d;
    double len = -1;
    const json_t *lv = json_array_get(seq_lens, (size_t)(b >= 0 ? b : 0));
    if (b < 0 || kvf_json_to_double(lv, &len)) return -1;
    e->seq_len = (int64_t)len;
    return 0;
}

/* The defining element of a finding: of the in-model failing elements its rule's verdict kept
 * (o's and lse's worst lists), the first by element_before. Rows out of the input model never
 * define a kernel's failure (docs/design.md §4). */
static void pick_element(kvf_group_finding *f, const json_t *root) {
    if (!f->rule) return;
    const json_t *seq_lens = json_object_get(json_object_get(root, "case"), "seq_lens");
    const json_t *verdicts = json_object_get(root, "verdicts");
    for (size_t r = 0; r < json_array_size(verdicts); r++) {
        const json_t *v = json_array_get(verdicts, r);
        const json_t *rn = json_object_get(v, "rule");
        if (!json_is_string(rn) || strcmp(json_string_value(rn), f->rule) != 0) continue;
        for (int out = 0; out < 2; out++) {
            const json_t *worst = json_object_get(json_object_get(v, out ? "lse" : "o"), "worst");
            for (size_t i = 0; i < json_array_size(worst); i++) {
                const json_t *w = json_array_get(worst, i);
                if (!json_is_true(json_object_get(w, "fails")) ||
                    json_is_true(json_object_get(w, "out_of_model")))
                    continue;
                kvf_group_element e;
                if (read_element(w, out, seq_lens, &e)) continue;
                if (!f->has_element || element_before(&e, &f->element)) f->element = e;
                f->has_element = 1;
            }
        }
        break;
    }
    if (f->has_element) f->feature = element_feature(&f->element);
}

/* What a group needs from the finding's .json, read leniently: a file that is missing or cannot
 * be parsed leaves the finding keyed by its name alone. -1 only when memory ran out. */
static int read_json(kvf_group_finding *f) {
    struct stat st;
    if (!f->json || stat(f->json, &st) != 0 || st.st_size > KVF__GROUP_JSON_MAX) return 0;
    char *data;
    size_t size;
    if (kvf_read_file(f->json, &data, &size)) return 0;
    /* Reals: a case's 64-bit seed may pass int64, which jansson's integers refuse. */
    json_t *root = json_loadb(data, size, JSON_DECODE_INT_AS_REAL, NULL);
    free(data);
    if (!root) return 0;
    f->kernel = str_member(root, "kernel");
    f->rule = str_member(root, "rule");
    f->signature = str_member(root, "signature");
    const json_t *rel = json_object_get(root, "relation");
    if (json_is_object(rel)) {
        f->relation = str_member(rel, "name");
        f->relation_seed = str_member(rel, "seed");
    }
    const json_t *fib = json_object_get(root, "fib_catches");
    f->fib = json_is_boolean(fib) ? json_is_true(fib) : -1;
    const json_t *a = json_object_get(root, "attribution");
    const json_t *kind = json_object_get(a, "kind");
    if (json_is_string(kind) && strcmp(json_string_value(kind), "precision") == 0) {
        const json_t *w = json_object_get(a, "within");
        kvf_precision p;
        kvf_error perr = {0};
        /* The canonical name, so that component order never splits a group. */
        if (json_is_string(w) && kvf_precision_parse(&p, json_string_value(w), &perr) == 0) {
            char name[KVF_PRECISION_NAME_MAX];
            kvf_precision_name(&p, name, sizeof name);
            f->precision = 1;
            f->within = strdup(name);
        }
    }
    f->attr_text = str_member(a, "text");
    pick_element(f, root);
    int oom = json_is_string(json_object_get(root, "kernel")) && !f->kernel;
    json_decref(root);
    return oom ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The key                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* A plugin's kernel is named "PATH.so:NAME": its own name is NAME, the path is where it was
 * loaded from this time (often a temporary folder), which must neither name nor split a group.
 * A FlashInfer-Bench solution "DIR/FILE.json" is named by its file. */
static void short_kernel(const char *kernel, char *name, size_t nsize, char *path, size_t psize) {
    const char *so = NULL;
    for (const char *p = strstr(kernel, ".so:"); p; p = strstr(p + 1, ".so:"))
        so = p;
    size_t n = strlen(kernel);
    if (so) {
        snprintf(name, nsize, "%s", so + 4);
        snprintf(path, psize, "%.*s", (int)(so + 3 - kernel), kernel);
    } else if (n > 5 && strcmp(kernel + n - 5, ".json") == 0 && strrchr(kernel, '/')) {
        snprintf(name, nsize, "%s", strrchr(kernel, '/') + 1);
        snprintf(path, psize, "%s", kernel);
    } else {
        snprintf(name, nsize, "%s", kernel);
        if (psize) path[0] = '\0';
    }
}

static int judge_class(const char *cls) {
    return strcmp(cls, "nonfinite") == 0 || strcmp(cls, "o-tolerance") == 0 ||
           strcmp(cls, "lse-tolerance") == 0;
}

static const char *const FEATURE_NAMES[] = {"row", "masked-row", "empty-seq"};

/* The grouping key (docs/reports.md, "Finding groups"):
 *   judged classes (nonfinite, o-tolerance, lse-tolerance) are one family, keyed
 *   KERNEL|numeric|FEATURE|VERDICT: the row feature of the defining element and the precision
 *   verdict ("defect", or "within:MODEL"). Neither the class nor the failing output is part
 *   of it: whether a wrong row shows as NaN or as a value far off, in o, in lse or in both,
 *   depends on the values it was computed from, not on the defect (one empty-sequence bug
 *   files lse|finite, o|finite and o|+inf signatures). A precision key then yields to the
 *   defect key of the same kernel and feature when that exists (unite());
 *   any other class (overflow, crash, hang, ...) is keyed by its signature with the kernel's
 *   own name: what the run reports is all that is known of it;
 *   a finding whose .json cannot be read, or whose rule kept no in-model failing element, is
 *   keyed by its own name: nothing is known that it shares. */
static void finding_key(const kvf_group_finding *f, char *key, size_t size) {
    char name[160], path[512];
    if (!f->kernel) {
        snprintf(key, size, "finding|%s", f->stem);
        return;
    }
    short_kernel(f->kernel, name, sizeof name, path, sizeof path);
    if (judge_class(f->cls) && f->has_element) {
        snprintf(key, size, "%s|numeric|%s|%s%s", name, FEATURE_NAMES[f->feature],
                 f->precision ? "within:" : "defect", f->precision ? f->within : "");
        return;
    }
    if (judge_class(f->cls) || !f->signature) {
        snprintf(key, size, "%s|finding|%s", name, f->stem);
        return;
    }
    /* "crash|PATH.so:NAME|signal11" -> "NAME|crash|signal11" */
    const char *after = strchr(f->signature, '|');
    after = after ? strchr(after + 1, '|') : NULL;
    snprintf(key, size, "%s|%s%s", name, f->cls, after ? after : "");
}

/* ------------------------------------------------------------------------------------------ */
/* Scanning and grouping                                                                       */
/* ------------------------------------------------------------------------------------------ */

static kvf_group_finding *find_stem(kvf_groups *g, size_t first, const char *stem, size_t n) {
    for (size_t i = first; i < g->nfindings; i++)
        if (strlen(g->findings[i].stem) == n && strncmp(g->findings[i].stem, stem, n) == 0)
            return &g->findings[i];
    return NULL;
}

static void free_paths(char **p, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(p[i]);
    free(p);
}

/* Adds a campaign's hits file (hits-*.counts, JSON {"hits": {"<stem>": n}}, written at its end) to
 * the findings of the directory (from index first on). A file that cannot be read adds nothing: the
 * counts are a figure for people, never a reason to fail a report. */
static void add_hits(kvf_groups *g, size_t first, const char *path) {
    /* Through the bounded reader: a FIFO or a device of that name must not block the report. */
    char *text = NULL;
    size_t len = 0;
    kvf_error err = {0};
    if (kvf_read_file_max(path, (size_t)64 << 20, &text, &len, &err)) return;
    json_t *root = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *hits = json_object_get(root, "hits");
    const char *stem;
    json_t *v;
    json_object_foreach(hits, stem, v) {
        kvf_group_finding *f = json_is_integer(v) && json_integer_value(v) > 0
                                   ? find_stem(g, first, stem, strlen(stem))
                                   : NULL;
        if (f) f->cases += (int64_t)json_integer_value(v);
    }
    json_decref(root);
}

/* Adds the <class>-<hash>.kvfz / .json pairs of one directory, and notes minimized cases
 * (<class>-<hash>.min.kvfz) beside them. */
static int scan_dir(kvf_groups *g, const char *dir, kvf_error *err) {
    DIR *d = opendir(dir);
    if (!d)
        return kvf_error_set(err, KVF_EIO, "cannot open findings directory %s: %s", dir,
                             strerror(errno));
    size_t first = g->nfindings;
    char **hits = NULL;
    size_t nhits = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        size_t n = strlen(name);
        int kvfz = n > 5 && strcmp(name + n - 5, ".kvfz") == 0;
        int json = n > 5 && strcmp(name + n - 5, ".json") == 0;
        const int counts = n > 7 && strcmp(name + n - 7, ".counts") == 0;
        if (name[0] == '.' || strstr(name, ".tmp.") || (!kvfz && !json && !counts)) continue;
        if (counts && strncmp(name, "hits-", 5) == 0) { /* a campaign's hit counts, read below */
            char **grown = realloc(hits, (nhits + 1) * sizeof *grown);
            if (!grown) goto oom;
            hits = grown;
            if (!(hits[nhits] = join_path(dir, name, ""))) goto oom;
            nhits++;
            continue;
        }
        size_t stem_len = n - 5;
        int min = kvfz && stem_len > 4 && strncmp(name + stem_len - 4, ".min", 4) == 0;
        if (min) stem_len -= 4;
        const char *dash = NULL;
        for (size_t i = 0; i < stem_len; i++)
            if (name[i] == '-') dash = name + i;
        if (!dash || dash == name || !is_hex_word(dash + 1, (size_t)(name + stem_len - dash - 1)))
            continue;
        kvf_group_finding *f = find_stem(g, first, name, stem_len);
        if (!f) {
            kvf_group_finding *nf = realloc(g->findings, (g->nfindings + 1) * sizeof *nf);
            if (!nf) goto oom;
            g->findings = nf;
            f = &g->findings[g->nfindings++];
            memset(f, 0, sizeof *f);
            f->fib = -1;
            f->case_bytes = -1;
            f->stem = strndup(name, stem_len);
            f->cls = strndup(name, (size_t)(dash - name));
            f->dir = strdup(dir);
            if (!f->stem || !f->cls || !f->dir) goto oom;
        }
        char **slot = min ? &f->min : kvfz ? &f->kvfz : &f->json;
        if (!*slot && !(*slot = join_path(dir, f->stem,
                                          min    ? ".min.kvfz"
                                          : kvfz ? ".kvfz"
                                                 : ".json")))
            goto oom;
    }
    closedir(d);
    for (size_t i = 0; i < nhits; i++)
        add_hits(g, first, hits[i]);
    free_paths(hits, nhits);
    return 0;
oom:
    closedir(d);
    free_paths(hits, nhits);
    return kvf_error_set(err, KVF_ENOMEM, "out of memory listing findings");
}

static int cmp_finding(const void *a, const void *b) {
    const kvf_group_finding *x = a, *y = b;
    int c = strcmp(x->dir, y->dir);
    return c ? c : strcmp(x->stem, y->stem);
}

static size_t uf_find(size_t *parent, size_t i) {
    while (parent[i] != i)
        i = parent[i] = parent[parent[i]];
    return i;
}

static void uf_union(size_t *parent, size_t a, size_t b) {
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    if (a != b) parent[a < b ? b : a] = a < b ? a : b;
}

/* The hash of a minimized case's bytes with its size (0 when there is none): equal minimized
 * cases show the same defect, whatever their findings' keys say. */
static uint64_t min_hash(const kvf_group_finding *f, long *size) {
    *size = -1;
    char *data;
    size_t n;
    if (!f->min || kvf_read_file(f->min, &data, &n)) return 0;
    uint64_t h = kvf_hash64(data, n) ^ (uint64_t)n;
    free(data);
    *size = (long)n;
    return h ? h : 1;
}

static long file_size(const char *path, time_t *mtime) {
    struct stat st;
    if (!path || stat(path, &st) != 0) return -1;
    if (mtime) *mtime = st.st_mtime;
    return (long)st.st_size;
}

static int cmp_group(const void *a, const void *b) {
    const kvf_group *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Fills one group's figures from its members (the findings whose .group is gi). */
static void group_figures(kvf_groups *gs, kvf_group *g, size_t gi) {
    size_t n = 0;
    for (size_t i = 0; i < gs->nfindings; i++) {
        kvf_group_finding *f = &gs->findings[i];
        if (f->group != gi) continue;
        if (n++ == 0) {
            g->first = g->smallest = i;
            g->worst = (size_t)-1;
            g->first_seen = f->mtime;
            g->kernel = f->kernel;
            g->rule = f->rule;
            if (f->kernel)
                short_kernel(f->kernel, g->kernel_short, sizeof g->kernel_short, g->kernel_path,
                             sizeof g->kernel_path);
            else
                snprintf(g->kernel_short, sizeof g->kernel_short, "?");
        }
        if (f->mtime < g->first_seen) {
            g->first_seen = f->mtime;
            g->first = i;
        }
        long sb = gs->findings[g->smallest].case_bytes;
        if (f->case_bytes >= 0 && (sb < 0 || f->case_bytes < sb)) g->smallest = i;
        if (f->has_element && (g->worst == (size_t)-1 ||
                               element_before(&f->element, &gs->findings[g->worst].element)))
            g->worst = i;
        g->cases += f->cases;
        g->fib_yes += f->fib == 1;
        g->fib_no += f->fib == 0;
    }
    g->count = n;
    /* The group's verdict is its key's: precision findings that joined a defect are its. */
    g->precision = strstr(g->key, "|within:") != NULL;
}

/* The groups as unions of findings: equal keys, or byte-identical minimized cases. Returns the
 * root finding of each finding's union in root[]. */
static int unite(kvf_groups *gs, size_t *root, char (*keys)[640]) {
    size_t n = gs->nfindings;
    uint64_t *mh = malloc((n ? n : 1) * sizeof *mh);
    if (!mh) return -1;
    for (size_t i = 0; i < n; i++) {
        root[i] = i;
        finding_key(&gs->findings[i], keys[i], sizeof keys[i]);
        long ms;
        mh[i] = min_hash(&gs->findings[i], &ms);
    }
    /* A looser model accepting some failures of a kernel that fails the same kind of row with
     * a defect shows only that those cases' errors came out small (a wrong read of small
     * values), not a second cause: such findings join the defect. Without a defect there, the
     * model is the finding's explanation and keeps its own group. */
    for (size_t i = 0; i < n; i++) {
        char *w = strstr(keys[i], "|within:");
        if (!w || strncmp(keys[i] + strcspn(keys[i], "|"), "|numeric|", 9) != 0) continue;
        char defect[640];
        snprintf(defect, sizeof defect, "%.*s|defect", (int)(w - keys[i]), keys[i]);
        for (size_t j = 0; j < n; j++)
            if (strcmp(keys[j], defect) == 0) {
                snprintf(keys[i], sizeof keys[i], "%s", defect);
                break;
            }
    }
    /* Quadratic, but a campaign files one finding per signature: hundreds, not millions. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0 || (mh[i] && mh[i] == mh[j])) uf_union(root, i, j);
    for (size_t i = 0; i < n; i++)
        root[i] = uf_find(root, i);
    free(mh);
    return 0;
}

static int build_groups(kvf_groups *gs, kvf_error *err) {
    size_t n = gs->nfindings;
    size_t *root = malloc((n ? n : 1) * sizeof *root);
    char(*keys)[640] = malloc((n ? n : 1) * sizeof *keys);
    gs->groups = calloc(n ? n : 1, sizeof *gs->groups);
    if (!root || !keys || !gs->groups || unite(gs, root, keys)) {
        free(root);
        free(keys);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory grouping findings");
    }
    /* One group per union; its key is the smallest of its members' keys, the same whichever
     * directory or order its findings were read in. */
    for (size_t i = 0; i < n; i++) {
        if (root[i] != i) continue;
        kvf_group *g = &gs->groups[gs->ngroups++];
        snprintf(g->key, sizeof g->key, "%s", keys[i]);
        for (size_t j = i; j < n; j++)
            if (root[j] == i) {
                g->count++;
                if (strcmp(keys[j], g->key) < 0) snprintf(g->key, sizeof g->key, "%s", keys[j]);
            }
    }
    /* The smallest key of each union, found once per root. */
    for (size_t i = 0; i < n; i++)
        if (root[i] != i && strcmp(keys[i], keys[root[i]]) < 0) /* keys of one size */
            memcpy(keys[root[i]], keys[i], sizeof keys[0]);
    if (gs->ngroups) qsort(gs->groups, gs->ngroups, sizeof *gs->groups, cmp_group);
    for (size_t gi = 0; gi < gs->ngroups; gi++) {
        kvf_group *g = &gs->groups[gi];
        snprintf(g->id, sizeof g->id, "%012" PRIx64,
                 kvf_hash64(g->key, strlen(g->key)) & UINT64_C(0xFFFFFFFFFFFF));
    }
    /* Each finding to its group, found again by its union's key after the sort (keys are
     * distinct across unions: equal keys were united). */
    for (size_t i = 0; i < n; i++)
        for (size_t gi = 0; gi < gs->ngroups; gi++)
            if (strcmp(gs->groups[gi].key, keys[root[i]]) == 0) gs->findings[i].group = gi;
    free(keys);
    free(root);
    for (size_t gi = 0; gi < gs->ngroups; gi++)
        group_figures(gs, &gs->groups[gi], gi);
    return 0;
}

int kvf_groups_scan(kvf_groups *out, const char *const *dirs, size_t ndirs, kvf_error *err) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < ndirs; i++) {
        if (!dirs[i]) continue;
        int seen = 0; /* a directory named twice is read once */
        for (size_t j = 0; j < i; j++)
            seen |= dirs[j] && strcmp(dirs[j], dirs[i]) == 0;
        int rc = seen ? 0 : scan_dir(out, dirs[i], err);
        if (rc) return rc;
    }
    if (out->nfindings) /* none: no array at all, which qsort may not be given */
        qsort(out->findings, out->nfindings, sizeof *out->findings, cmp_finding);
    for (size_t i = 0; i < out->nfindings; i++) {
        kvf_group_finding *f = &out->findings[i];
        if (read_json(f)) return kvf_error_set(err, KVF_ENOMEM, "out of memory reading findings");
        time_t t = 0;
        if (file_size(f->kvfz, &t) < 0) file_size(f->json, &t);
        f->mtime = t;
        long mb = file_size(f->min, NULL), kb = file_size(f->kvfz, NULL);
        f->case_bytes = mb >= 0 ? mb : kb;
    }
    return build_groups(out, err);
}

void kvf_groups_free(kvf_groups *g) {
    if (!g) return;
    for (size_t i = 0; i < g->nfindings; i++) {
        kvf_group_finding *f = &g->findings[i];
        char *strings[] = {f->dir,       f->stem,     f->kvfz,         f->json,      f->min,
                           f->cls,       f->kernel,   f->rule,         f->signature, f->within,
                           f->attr_text, f->relation, f->relation_seed};
        for (size_t s = 0; s < sizeof strings / sizeof strings[0]; s++)
            free(strings[s]);
    }
    free(g->findings);
    free(g->groups);
    memset(g, 0, sizeof *g);
}

const char *kvf_group_case(const kvf_groups *gs, const kvf_group *g) {
    if (!g->count) return NULL;
    const kvf_group_finding *f = &gs->findings[g->smallest];
    return f->min ? f->min : f->kvfz;
}

void kvf_group_case_shape(const char *kvfz_path, char *buf, size_t size) {
    snprintf(buf, size, "?");
    char *data;
    size_t n;
    if (!kvfz_path || kvf_read_file(kvfz_path, &data, &n)) return;
    kvf_spec s;
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err = {0};
    int rc = kvf_spec_decode(&s, (const uint8_t *)data, n, &lim, &err);
    free(data);
    if (rc) return;
    const kvf_recipe *rp = &s.recipe;
    int64_t lo = INT64_MAX, hi = 0, total = 0;
    uint32_t empty = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        int64_t len = kvf_recipe_seq_len(rp, b);
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
        total += len;
        empty += len == 0;
    }
    char lens[96];
    if (rp->batch_size == 0)
        snprintf(lens, sizeof lens, "no sequence");
    else if (lo == hi)
        snprintf(lens, sizeof lens, "L %" PRId64, lo);
    else
        snprintf(lens, sizeof lens, "L %" PRId64 "..%" PRId64 ", %" PRId64 " tokens", lo, hi,
                 total);
    char extra[64] = "", layout[160] = "", quant[112] = "";
    if (!kvf_quant_recipe_is_plain(&s.quant)) {
        char text[96];
        kvf_kv_quant_text(&s.quant.kv, text, sizeof text);
        snprintf(quant, sizeof quant, ", %s", text);
    }
    if (empty) snprintf(extra, sizeof extra, " (%u empty)", empty);
    if (!kvf_layout_is_dense(&s.layout)) {
        char text[140];
        kvf_layout_text(&s.layout, text, sizeof text);
        snprintf(layout, sizeof layout, ", layout %s", text);
    }
    snprintf(buf, size, "B %u, Hq %u/Hk %u, D %u, S %u, %s%s%s%s%s", (unsigned)rp->batch_size,
             (unsigned)rp->num_qo_heads, (unsigned)rp->num_kv_heads, (unsigned)rp->head_dim,
             (unsigned)rp->page_size, lens, extra, s.num_overrides ? ", overrides" : "", layout,
             quant);
    kvf_spec_free(&s);
}

void kvf_group_fib_text(const kvf_group *g, char *buf, size_t size) {
    size_t judged = g->fib_yes + g->fib_no;
    if (judged == 0)
        snprintf(buf, size, "not judged by fib");
    else if (g->fib_yes == judged)
        snprintf(buf, size, "fib catches it");
    else if (g->fib_no == judged)
        snprintf(buf, size, "fib misses it");
    else
        snprintf(buf, size, "fib catches %zu of %zu", g->fib_yes, judged);
}

void kvf_group_verdict_text(const kvf_groups *gs, const kvf_group *g, char *buf, size_t size) {
    (void)gs;
    const char *w = strstr(g->key, "|within:");
    if (w)
        snprintf(buf, size, "precision: within %s", w + 8);
    else
        snprintf(buf, size, "defect (no precision model explains it)");
}
