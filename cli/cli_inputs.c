/* The commands' shared inputs (cli.h): case files collected from paths, a finding's report
 * beside its case, the case limits, and kernels named on the command line. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "kvfuzz/env.h"
#include "kvfuzz/file.h"
#include "kvfuzz/test_kernels.h"

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push_path(char ***paths, size_t *count, size_t *cap, const char *path) {
    if (*count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        char **np = realloc(*paths, ncap * sizeof *np);
        if (!np) return -1;
        *paths = np;
        *cap = ncap;
    }
    char *copy = strdup(path);
    if (!copy) return -1;
    (*paths)[(*count)++] = copy;
    return 0;
}

int cli_collect_cases(const char *cmd, char **args, int nargs, char ***paths, size_t *count) {
    size_t cap = 0;
    *paths = NULL;
    *count = 0;
    for (int i = 0; i < nargs; i++) {
        struct stat st;
        if (stat(args[i], &st) != 0) {
            cli_usage_error(cmd, "cannot read %s: %s", args[i], strerror(errno));
            goto fail;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (push_path(paths, count, &cap, args[i])) goto oom;
            continue;
        }
        DIR *dir = opendir(args[i]);
        if (!dir) {
            cli_usage_error(cmd, "cannot open directory %s: %s", args[i], strerror(errno));
            goto fail;
        }
        size_t first = *count;
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".kvfz")) continue;
            size_t len = strlen(args[i]) + strlen(e->d_name) + 2;
            char *full = malloc(len);
            if (!full) {
                closedir(dir);
                goto oom;
            }
            snprintf(full, len, "%s/%s", args[i], e->d_name);
            int rc = push_path(paths, count, &cap, full);
            free(full);
            if (rc) {
                closedir(dir);
                goto oom;
            }
        }
        closedir(dir);
        /* Not for a folder without cases: *paths may still be NULL, which qsort must not get. */
        if (*count > first) qsort(*paths + first, *count - first, sizeof **paths, cmp_str);
    }
    return 0;
oom:
    cli_usage_error(cmd, "out of memory listing case files");
fail:
    cli_free_paths(*paths, *count);
    *paths = NULL;
    *count = 0;
    return -1;
}

int cli_read_report(const char *case_path, json_t **report, kvf_error *err) {
    *report = NULL;
    size_t len = strlen(case_path);
    char jpath[4096];
    if (len < 5 || strcmp(case_path + len - 5, ".kvfz") != 0 || len >= sizeof jpath) return 0;
    snprintf(jpath, sizeof jpath, "%.*s.json", (int)(len - 5), case_path);
    struct stat st;
    if (stat(jpath, &st) != 0 && errno == ENOENT) return 0;
    char *text;
    size_t n;
    int rc = kvf_read_file_max(jpath, (size_t)16 << 20, &text, &n, err);
    if (rc) return rc;
    json_error_t je;
    json_t *j = json_loadb(text, n, JSON_DECODE_INT_AS_REAL, &je);
    free(text);
    if (!j)
        return kvf_error_set(err, KVF_EFORMAT, "the report %s is not JSON: %s at line %d", jpath,
                             je.text, je.line);
    if (!json_is_object(j)) {
        json_decref(j);
        return kvf_error_set(err, KVF_EFORMAT, "the report %s is not a JSON object", jpath);
    }
    *report = j;
    return 0;
}

int cli_finding_relation(const char *case_path, kvf_minimize_opts *o, kvf_error *err) {
    json_t *report = NULL;
    int rc = cli_read_report(case_path, &report, err);
    if (rc) return rc;
    int found = kvf_finding_report_relation(report, &o->relation, &o->relation_seed);
    json_decref(report);
    if (found == 1) return 0;
    return kvf_error_set(err, KVF_EFORMAT,
                         found == 0 ? "an invariance finding is kept broken through the relation "
                                      "its report names, and %s has no report naming one beside it"
                                    : "the report beside %s names its relation malformed (it needs "
                                      "\"relation\": {\"name\", \"seed\"})",
                         case_path);
}

void cli_free_paths(char **paths, size_t count) {
    for (size_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}

void cli_limits(kvf_limits *limits) {
    kvf_limits_default(limits);
    int64_t gib;
    /* main refused a bad value before the command ran, so this reads a valid one or none. */
    if (kvf_env_int("KVF_MAX_POOL_GIB", 0, &gib, NULL) == 0 && gib > 0)
        limits->max_pool_bytes = gib << 30;
}

int cli_kernel_cannot_start(const char *cmd, const char *kernel, const char *reason) {
    /* The runner says "kernel K could not start: ", the buffer host "K could not start: ":
     * the reason is what follows them. */
    char prefix[256];
    for (int pass = 0; pass < 2; pass++) {
        snprintf(prefix, sizeof prefix, "%s%s could not start: ", pass ? "" : "kernel ", kernel);
        if (strncmp(reason, prefix, strlen(prefix)) == 0) reason += strlen(prefix);
    }
    return cli_usage_error(cmd, "kernel %s could not start: %s", kernel, reason);
}

int cli_add_kernel(const char *cmd, const char *spec, kvf_kernel_list *kernels) {
    kvf_error err = {0};
    if (kvf_kernel_resolve_list(spec, kvf_fuzz_kernel_find, kernels, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    return KVF_EXIT_OK;
}

int cli_one_kernel(const char *cmd, const char *spec, const kvf_kernel **kernel) {
    kvf_kernel_list ks = {0};
    if (cli_add_kernel(cmd, spec, &ks)) return KVF_EXIT_USAGE;
    if (ks.count != 1) {
        char names[512] = "";
        size_t at = 0;
        for (size_t i = 0; i < ks.count && at + 2 < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                                   ks.items[i]->name);
        const size_t n = ks.count;
        kvf_kernel_list_free(&ks);
        return cli_usage_error(cmd, "%s holds %zu kernels; this command runs one: name it (%s)",
                               spec, n, names);
    }
    *kernel = ks.items[0];
    free(ks.items);
    return KVF_EXIT_OK;
}

int cli_recorded_kernel_present(const char *cmd, const char *kernel) {
    const char *end = strstr(kernel, ".so:");
    if (!end) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%.*s", (int)(end + 3 - kernel), kernel);
    struct stat st;
    if (stat(path, &st) == 0) return 0;
    const char *base = strrchr(path, '/');
    return cli_usage_error(cmd,
                           "the finding's report records kernel %s of the library %s, which is "
                           "not there (moved, or built in another folder): name the library "
                           "where it is now, as --kernel NEWDIR/%s:%s",
                           end + 4, path, base ? base + 1 : path, end + 4);
}

int cli_case_folder(const char *cmd, const char *option, const char *dir) {
    char *d = (char *)dir, **found = NULL;
    size_t nfound = 0;
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return cli_usage_error(cmd, "%s %s is not a folder", option, dir);
    if (cli_collect_cases(cmd, &d, 1, &found, &nfound)) return KVF_EXIT_USAGE;
    /* A folder of files that are not case files would leave the option with nothing to do. */
    size_t readable = 0;
    kvf_limits lim;
    cli_limits(&lim);
    for (size_t i = 0; i < nfound && !readable; i++) {
        char *data;
        size_t n;
        if (kvf_read_file(found[i], &data, &n)) continue;
        kvf_spec spec;
        if (kvf_spec_decode(&spec, (const uint8_t *)data, n, &lim, NULL) == 0) {
            readable++;
            kvf_spec_free(&spec);
        }
        free(data);
    }
    int bad = 0;
    if (nfound == 0)
        bad = cli_usage_error(cmd, "%s %s holds no .kvfz case", option, dir);
    else if (!readable)
        bad = cli_usage_error(cmd, "%s %s holds no .kvfz case kvfuzz can read (%zu unreadable)",
                              option, dir, nfound);
    cli_free_paths(found, nfound);
    return bad;
}
