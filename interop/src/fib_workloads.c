/* A FlashInfer-Bench dataset's workloads into .kvfz case files (kvfuzz/fib.h, "a dataset's
 * workloads into case files"; docs/fib.md). */
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/fib.h"
#include "kvfuzz/file.h"

/* Whether path was written before in this import (and, if not, remembers it). */
static int already_written(kvf_fib_importer *im, const char *path) {
    for (size_t i = 0; i < im->nnames; i++)
        if (strcmp(im->names[i], path) == 0) return 1;
    char **n = realloc(im->names, (im->nnames + 1) * sizeof *n);
    if (!n) return 0;
    im->names = n;
    im->names[im->nnames] = strdup(path);
    if (im->names[im->nnames]) im->nnames++;
    return 0;
}

/* One workload line, `what` naming it ("FILE line N"): imported, built, written and told. */
static int import_line(kvf_fib_importer *im, const kvf_fib_definition *def, const char *line,
                       size_t len, const char *what, kvf_error *err) {
    kvf_spec spec;
    kvf_case c;
    kvf_error e = {0};
    int rc = kvf_fib_import(&spec, def, line, len, what, &im->opts, &e);
    if (rc) {
        /* A sentence about the line itself already starts with where it is. */
        if (strncmp(e.msg, what, strlen(what)) == 0) return kvf_error_set(err, rc, "%s", e.msg);
        return kvf_error_set(err, rc, "%s: %s", what, e.msg);
    }
    if ((rc = kvf_case_build(&c, &spec, &im->opts.limits, &e))) {
        kvf_spec_free(&spec);
        return kvf_error_set(err, rc, "%s: the workload is not a valid case: %s", what, e.msg);
    }
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s/%s_%s.kvfz", im->out_dir, def->name, spec.origin.workload_uuid);
    if (already_written(im, out)) {
        rc = kvf_error_set(err, KVF_EINVAL, "%s: workload uuid %s appears twice for %s", what,
                           spec.origin.workload_uuid, def->name);
    } else if ((rc = kvf_spec_save(&spec, out, &e))) {
        kvf_error_set(err, rc, "%s", e.msg);
    } else {
        kvf_fib_imported x = {def, &spec, &c, out};
        if (im->on_case) im->on_case(im->ctx, &x);
        im->written++;
    }
    kvf_case_free(&c);
    kvf_spec_free(&spec);
    return rc;
}

int kvf_fib_import_workloads(kvf_fib_importer *im, const kvf_fib_definition *def, const char *path,
                             kvf_error *err) {
    char *text;
    size_t n;
    int rc = kvf_read_file_max(path, (size_t)256 << 20, &text, &n, err);
    if (rc) return rc;
    size_t lineno = 0;
    for (char *line = text; line < text + n && rc == 0;) {
        char *end = memchr(line, '\n', (size_t)(text + n - line));
        size_t len = end ? (size_t)(end - line) : (size_t)(text + n - line);
        lineno++;
        char *next = line + len + (end ? 1 : 0);
        size_t blank = 0;
        while (blank < len && (line[blank] == ' ' || line[blank] == '\t' || line[blank] == '\r'))
            blank++;
        if (blank < len) {
            char what[PATH_MAX + 32];
            snprintf(what, sizeof what, "%s line %zu", path, lineno);
            rc = import_line(im, def, line, len, what, err);
        }
        line = next;
    }
    free(text);
    return rc;
}

/* The workloads files of a definition in a dataset: workloads/<op_type>/<def>.jsonl (FIB's
 * layout), or directly under workloads/. */
static int import_definition(kvf_fib_importer *im, const char *dataset, const char *literal,
                             const kvf_fib_definition *def, kvf_error *err) {
    char pattern[PATH_MAX];
    glob_t g;
    size_t found = 0;
    int rc = 0;
    const char *forms[2] = {"%s/workloads/*/%s.jsonl", "%s/workloads/%s.jsonl"};
    for (int f = 0; f < 2 && rc == 0; f++) {
        snprintf(pattern, sizeof pattern, forms[f], literal, def->name);
        if (glob(pattern, 0, NULL, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc && rc == 0; i++, found++)
                rc = kvf_fib_import_workloads(im, def, g.gl_pathv[i], err);
        globfree(&g);
    }
    if (rc == 0 && found == 0 && im->warn) {
        char msg[2 * PATH_MAX];
        snprintf(msg, sizeof msg, "%s has no workloads file under %s/workloads", def->name,
                 dataset);
        im->warn(im->ctx, msg);
    }
    return rc;
}

/* The definitions of one of the dataset's layouts (pattern), *decode counting those imported. */
static int import_definitions(kvf_fib_importer *im, const char *dataset, const char *literal,
                              const char *pattern, const char *only, size_t *decode,
                              kvf_error *err) {
    glob_t g;
    int rc = 0;
    if (glob(pattern, 0, NULL, &g) != 0) {
        globfree(&g);
        return 0;
    }
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        size_t stem = strlen(base) - strlen(".json");
        if (only && (strlen(only) != stem || strncmp(base, only, stem) != 0)) continue;
        /* A dataset holds every kind of kernel; only paged decode is kvfuzz's. */
        if (!only && strncmp(base, KVF_FIB_FAMILY, strlen(KVF_FIB_FAMILY)) != 0) {
            im->skipped++;
            continue;
        }
        kvf_fib_definition def;
        if ((rc = kvf_fib_definition_load(&def, g.gl_pathv[i], err))) break;
        (*decode)++;
        rc = import_definition(im, dataset, literal, &def, err);
    }
    globfree(&g);
    return rc;
}

int kvf_fib_import_dataset(kvf_fib_importer *im, const char *dataset, const char *only,
                           kvf_error *err) {
    char pattern[PATH_MAX];
    int rc = 0;
    size_t decode = 0;
    const char *forms[2] = {"%s/definitions/*/*.json", "%s/definitions/*.json"};
    char literal[PATH_MAX]; /* a folder named "data[1]" is that folder, not "data1" */
    if (kvf_glob_escape(dataset, literal, sizeof literal))
        return kvf_error_set(err, KVF_EINVAL, "the dataset path %.80s... is too long", dataset);
    for (int f = 0; f < 2 && rc == 0; f++) {
        snprintf(pattern, sizeof pattern, forms[f], literal);
        rc = import_definitions(im, dataset, literal, pattern, only, &decode, err);
    }
    if (rc || decode) return rc;
    if (only)
        return kvf_error_set(err, KVF_EINVAL, "%s has no definition %s under definitions/", dataset,
                             only);
    return kvf_error_set(err, KVF_EINVAL,
                         "%s has no " KVF_FIB_FAMILY " definition under definitions/ (%zu other "
                         "definitions)",
                         dataset, im->skipped);
}

void kvf_fib_importer_free(kvf_fib_importer *im) {
    for (size_t i = 0; i < im->nnames; i++)
        free(im->names[i]);
    free(im->names);
    im->names = NULL;
    im->nnames = 0;
}

void kvf_fib_guess_root(const char *workloads, char *root, size_t n) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", workloads);
    char *parts[3] = {0};
    for (int i = 0; i < 3; i++) {
        char *s = strrchr(buf, '/');
        if (!s) break;
        *s = 0;
        parts[i] = s + 1;
    }
    /* buf is now three levels up when parts[2] == "workloads"; a relative path may start at
     * workloads/ itself. */
    if (parts[2] && strcmp(parts[2], "workloads") == 0) {
        snprintf(root, n, "%s", buf[0] ? buf : "/");
        return;
    }
    if (parts[1] && !parts[2] && strcmp(buf, "workloads") == 0) {
        snprintf(root, n, ".");
        return;
    }
    snprintf(buf, sizeof buf, "%s", workloads);
    char *s = strrchr(buf, '/');
    if (s)
        *s = 0, snprintf(root, n, "%s", buf[0] ? buf : "/");
    else
        snprintf(root, n, ".");
}
