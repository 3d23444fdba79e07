/* A FlashInfer-Bench dataset written (kvfuzz/fib_dataset.h, docs/fib.md): its files in the
 * layout FIB's validator reads, the solution records, and the folder it is written into and
 * moved from. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvfuzz/fib_dataset.h"
#include "kvfuzz/file.h"

/* Writes root/<sub>/<name><ext> (sub a relative folder, created as needed). */
static int write_text(const char *root, const char *sub, const char *name, const char *ext,
                      const char *text, size_t len, kvf_error *err) {
    char dir[PATH_MAX], path[PATH_MAX + 160];
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, sub) >= sizeof dir)
        return kvf_error_set(err, KVF_EIO, "the dataset path %.80s is too long", root);
    int rc = kvf_mkdirs(dir, err);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
    return kvf_write_atomic_bytes(path, text, len, err);
}

/* s as a Python string literal's body: backslash and quote escaped, anything outside printable
 * ASCII as \xNN (the name only appears in a message, so a byte is as good as a character). */
static void python_escape(const char *s, char *out, size_t n) {
    size_t at = 0;
    for (; *s && at + 5 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\\' || ch == '"')
            at += (size_t)snprintf(out + at, n - at, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            at += (size_t)snprintf(out + at, n - at, "\\x%02x", ch);
        else
            out[at++] = (char)ch;
    }
    out[at] = 0;
}

/* The record kvfuzz writes for a kernel of its own (built in, or a plugin library): FIB cannot
 * run it, so its one source says so when called, with the definition's signature in
 * destination-passing style; it exists so that the traces name a solution FIB resolves. */
static json_t *kvfuzz_solution(const kvf_fib_solution *r) {
    char name[1100], source[2600], desc[1400];
    python_escape(r->kernel.name, name, sizeof name);
    snprintf(source, sizeof source,
             "# kvfuzz's traces name this solution for the kernel they were recorded on, "
             "KERNEL below.\n"
             "# It runs inside kvfuzz only (built in, or a plugin library kvfuzz loads), so\n"
             "# FlashInfer-Bench cannot run it: replay a finding with\n"
             "# `kvfuzz replay --kernel KERNEL FINDING.kvfz`.\n"
             "KERNEL = \"%s\"\n\n\n"
             "def run(q, k_cache, v_cache, kv_indptr, kv_indices, %ssm_scale, %soutput, lse):\n"
             "    raise NotImplementedError(KERNEL + \" runs inside kvfuzz only; "
             "FlashInfer-Bench cannot run it\")\n",
             name, r->def->s == 1 ? "" : "kv_last_page_len, ",
             kvf_kv_dtype_is_fp8(r->def->kv_dtype) ? "k_scale, v_scale, " : "");
    snprintf(desc, sizeof desc,
             "kvfuzz's kernel %s, which runs inside kvfuzz only: this record names the kernel "
             "kvfuzz's traces were recorded on (calling it raises NotImplementedError).",
             name);
    return json_pack("{s:s, s:s, s:s, s:{s:s, s:[s], s:s, s:[], s:b}, s:[{s:s, s:s}], s:s}", "name",
                     r->name, "definition", r->def->name, "author", r->author, "spec", "language",
                     "python", "target_hardware", r->kernel.cuda ? "cuda" : "cpu", "entry_point",
                     "main.py::run", "dependencies", "destination_passing_style", 1, "sources",
                     "path", "main.py", "content", source, "description", desc);
}

/* A FIB solution kernel's own record, named and placed as this export holds it (its
 * definition is the one the export writes for the shape). */
static json_t *fib_solution(const kvf_fib_solution *r) {
    json_t *j = json_deep_copy(r->kernel.solution);
    if (j && (json_object_set_new(j, "name", json_string(r->name)) ||
              json_object_set_new(j, "definition", json_string(r->def->name)) ||
              json_object_set_new(j, "author", json_string(r->author)))) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* Each definition that has workloads (the others' findings were refused): its definition,
 * workloads and traces files. */
static int write_definitions(const kvf_fib_dataset *ds, const char *dir, size_t *ndefs,
                             kvf_error *err) {
    int rc = 0;
    for (size_t i = 0; i < ds->ndefs && rc == 0; i++) {
        const kvf_fib_def *d = &ds->defs[i];
        if (!d->wlen) continue; /* its findings were refused */
        (*ndefs)++;
        char *def = kvf_fib_definition_json(d->hq, d->hk, d->d, d->s, d->kv_dtype);
        if (!def)
            return kvf_error_set(err, KVF_ENOMEM, "out of memory writing definition %s", d->name);
        rc = write_text(dir, "definitions/" KVF_FIB_OP_TYPE, d->name, ".json", def, strlen(def),
                        err);
        if (!rc)
            rc = write_text(dir, "workloads/" KVF_FIB_OP_TYPE, d->name, ".jsonl", d->workloads,
                            d->wlen, err);
        for (size_t t = 0; t < d->ntraces && rc == 0; t++) {
            char sub[512];
            snprintf(sub, sizeof sub, "traces/%s/" KVF_FIB_OP_TYPE, d->traces[t].author);
            if (d->traces[t].len)
                rc = write_text(dir, sub, d->name, ".jsonl", d->traces[t].text, d->traces[t].len,
                                err);
        }
        free(def);
    }
    return rc;
}

/* The solution records the traces name (only of definitions that went out). */
static int write_solutions(const kvf_fib_dataset *ds, const char *dir, kvf_error *err) {
    int rc = 0;
    for (size_t i = 0; i < ds->nsolutions && rc == 0; i++) {
        const kvf_fib_solution *r = &ds->solutions[i];
        if (!r->def->wlen) continue;
        json_t *j = r->kernel.solution ? fib_solution(r) : kvfuzz_solution(r);
        char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        json_decref(j);
        char sub[512];
        snprintf(sub, sizeof sub, "solutions/%s/" KVF_FIB_OP_TYPE "/%s", r->author, r->def->name);
        if (!text)
            rc = kvf_error_set(err, KVF_ENOMEM, "out of memory writing solution %s", r->name);
        else
            rc = write_text(dir, sub, r->name, ".json", text, strlen(text), err);
        free(text);
    }
    return rc;
}

int kvf_fib_dataset_write(const kvf_fib_dataset *ds, const char *dir, size_t *ndefs,
                          kvf_error *err) {
    *ndefs = 0;
    int rc = write_definitions(ds, dir, ndefs, err);
    if (!rc) rc = write_solutions(ds, dir, err);
    return rc;
}

/* Whether dir holds no entry but . and .. (1), or cannot be read (0). */
static int folder_is_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

int kvf_fib_dataset_begin(const char *final_dir, char *partial, size_t n, kvf_error *err) {
    struct stat sb;
    if (stat(final_dir, &sb) == 0 && (!S_ISDIR(sb.st_mode) || !folder_is_empty(final_dir)))
        return kvf_error_set(err, KVF_EINVAL, "%s exists and is not an empty folder", final_dir);
    if ((size_t)snprintf(partial, n, "%s.partial-%ld", final_dir, (long)getpid()) >= n ||
        mkdir(partial, 0777) != 0)
        return kvf_error_set(err, KVF_EIO, "cannot create the dataset folder %s", final_dir);
    return 0;
}

int kvf_fib_dataset_publish(const char *partial, const char *final_dir, kvf_error *err) {
    struct stat sb;
    if ((stat(final_dir, &sb) == 0 && rmdir(final_dir) != 0) || rename(partial, final_dir) != 0)
        return kvf_error_set(err, KVF_EIO, "cannot move the dataset into %s: %s", final_dir,
                             strerror(errno));
    return 0;
}
