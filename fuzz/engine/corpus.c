/* The campaign's corpus (corpus.h). */
#include "corpus.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvfuzz/file.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/spec.h"

int kvf__corpus_init(kvf__corpus *c, const char *dir, const kvf_limits *limits) {
    memset(c, 0, sizeof *c);
    c->dir = dir;
    c->limits = *limits;
    pthread_mutex_init(&c->mu, NULL);
    return 0;
}

void kvf__corpus_free(kvf__corpus *c) {
    for (size_t i = 0; i < c->n; i++)
        free(c->e[i].bytes);
    free(c->e);
    free(c->names);
    pthread_mutex_destroy(&c->mu);
    memset(c, 0, sizeof *c);
}

static uint64_t name_key(const char *name) {
    return kvf_hash64(name, strlen(name)) | 1;
}

static int names_has(const kvf__corpus *c, uint64_t key) {
    if (!c->names_cap) return 0;
    for (size_t i = key % c->names_cap;; i = (i + 1) % c->names_cap) {
        if (c->names[i] == key) return 1;
        if (c->names[i] == 0) return 0;
    }
}

/* Adds key to the name set (kept under half full). A set that cannot grow only means the file
 * is read again at the next re-read, where its content is deduplicated. Caller holds mu. */
static void names_add(kvf__corpus *c, uint64_t key) {
    if (names_has(c, key)) return;
    if (2 * (c->names_n + 1) > c->names_cap) {
        size_t cap = c->names_cap ? 2 * c->names_cap : 1024;
        uint64_t *grown = calloc(cap, sizeof *grown);
        if (!grown) return;
        for (size_t i = 0; i < c->names_cap; i++) {
            if (!c->names[i]) continue;
            size_t j = c->names[i] % cap;
            while (grown[j])
                j = (j + 1) % cap;
            grown[j] = c->names[i];
        }
        free(c->names);
        c->names = grown;
        c->names_cap = cap;
    }
    size_t j = key % c->names_cap;
    while (c->names[j])
        j = (j + 1) % c->names_cap;
    c->names[j] = key;
    c->names_n++;
}

/* Caller holds mu. */
static int add_entry(kvf__corpus *c, const uint8_t *bytes, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return -1;
    memcpy(copy, bytes, size);
    if (c->n < KVF__CORPUS_CAP) {
        kvf__corpus_entry *n = realloc(c->e, (c->n + 1) * sizeof *n);
        if (!n) {
            free(copy);
            return -1;
        }
        c->e = n;
        c->e[c->n++] = (kvf__corpus_entry){copy, size};
    } else {
        /* Full: replace an entry other than the initial ones, which stay as anchors. */
        size_t span = c->n - c->initial;
        size_t i = c->initial + (size_t)(kvf_hash64(bytes, size) % (span ? span : 1));
        free(c->e[i].bytes);
        c->e[i] = (kvf__corpus_entry){copy, size};
    }
    return 0;
}

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The folder's .kvfz names not in the name set, sorted; each is added to the set (a file that
 * does not decode is not read again). Caller holds mu. -1 when the folder cannot be read. */
static int new_names(kvf__corpus *c, char ***out, size_t *count) {
    DIR *d = opendir(c->dir);
    if (!d) return -1;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".kvfz")) continue;
        uint64_t key = name_key(e->d_name);
        if (names_has(c, key)) continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn) {
            rc = -2;
            break;
        }
        names = nn;
        if (!(names[n] = strdup(e->d_name))) {
            rc = -2;
            break;
        }
        n++;
        names_add(c, key);
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    *out = names;
    *count = n;
    return rc;
}

/* Reads the named files of the folder into the corpus. Returns how many decoded; *skipped
 * counts the others. Caller holds mu. */
static size_t take_in(kvf__corpus *c, char **names, size_t n, size_t *skipped) {
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", c->dir, names[i]);
        char *text;
        size_t size;
        kvf_spec s;
        if (kvf_read_file(path, &text, &size) == 0) {
            const uint8_t *bytes = (const uint8_t *)text;
            if (kvf_spec_decode(&s, bytes, size, &c->limits, NULL) == 0) {
                kvf_spec_free(&s);
                if (c->n < KVF__CORPUS_CAP && add_entry(c, bytes, size) == 0) added++;
            } else {
                (*skipped)++;
            }
            free(text);
        } else {
            (*skipped)++;
        }
        free(names[i]);
    }
    free(names);
    return added;
}

int kvf__corpus_load(kvf__corpus *c, FILE *log, kvf_error *err) {
    if (!c->dir) return 0;
    int rc = kvf_mkdirs(c->dir, err);
    if (rc) return rc;
    pthread_mutex_lock(&c->mu);
    char **names = NULL;
    size_t n = 0;
    int lr = new_names(c, &names, &n);
    if (lr) {
        int saved = errno;
        for (size_t i = 0; i < n; i++)
            free(names[i]);
        free(names);
        pthread_mutex_unlock(&c->mu);
        if (lr == -2) return kvf_error_set(err, KVF_ENOMEM, "out of memory reading the corpus");
        return kvf_error_set(err, KVF_EIO, "cannot open corpus folder %s: %s", c->dir,
                             strerror(saved));
    }
    size_t skipped = 0;
    take_in(c, names, n, &skipped);
    c->initial = c->n;
    pthread_mutex_unlock(&c->mu);
    if (skipped)
        fprintf(log, "kvfuzz fuzz: skipped %zu corpus file(s) in %s that do not decode\n", skipped,
                c->dir);
    return 0;
}

size_t kvf__corpus_reload(kvf__corpus *c) {
    if (!c->dir) return 0;
    pthread_mutex_lock(&c->mu);
    char **names = NULL;
    size_t n = 0, skipped = 0, added = 0;
    if (new_names(c, &names, &n) == -1) {
        pthread_mutex_unlock(&c->mu); /* the folder went away: try again next time */
        return 0;
    }
    added = take_in(c, names, n, &skipped);
    c->reloaded += (int64_t)added;
    pthread_mutex_unlock(&c->mu);
    return added;
}

size_t kvf__corpus_size(kvf__corpus *c) {
    pthread_mutex_lock(&c->mu);
    size_t n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

size_t kvf__corpus_initial(const kvf__corpus *c) {
    return c->initial;
}

static void copy_entry(kvf__corpus_entry *dst, const kvf__corpus_entry *src) {
    dst->size = src->size;
    dst->bytes = malloc(src->size ? src->size : 1);
    if (dst->bytes) memcpy(dst->bytes, src->bytes, src->size);
}

void kvf__corpus_pick(kvf__corpus *c, kvf_prng *rng, uint64_t index, int attempt,
                      kvf__corpus_entry *base, kvf__corpus_entry *other, int *as_is) {
    *base = (kvf__corpus_entry){0};
    *other = (kvf__corpus_entry){0};
    pthread_mutex_lock(&c->mu);
    size_t n = c->n;
    *as_is = index < c->initial && attempt == 0;
    if (n && (*as_is || kvf_prng_below(rng, 4) != 0)) {
        size_t i = *as_is ? (size_t)index : (size_t)kvf_prng_below(rng, n);
        copy_entry(base, &c->e[i]);
        if (!*as_is && kvf_prng_below(rng, 8) == 0)
            copy_entry(other, &c->e[(size_t)kvf_prng_below(rng, n)]);
    }
    pthread_mutex_unlock(&c->mu);
}

int kvf__corpus_add(kvf__corpus *c, const uint8_t *bytes, size_t size, kvf_error *err) {
    pthread_mutex_lock(&c->mu);
    add_entry(c, bytes, size);
    int rc = 0;
    if (c->dir) {
        char name[64], path[4200];
        snprintf(name, sizeof name, "%016" PRIx64 ".kvfz", kvf_hash64(bytes, size));
        snprintf(path, sizeof path, "%s/%s", c->dir, name);
        names_add(c, name_key(name)); /* our own: never read back */
        if (access(path, F_OK) != 0 && kvf_write_atomic_bytes(path, bytes, size, err)) rc = -1;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}
