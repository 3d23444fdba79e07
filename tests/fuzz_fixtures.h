/* Shared helpers for the fuzz/ unit tests (test_fuzz_*.c): the default case limits, fresh
 * temporary directories (make_tmp, count_files, rm_tree) and a small valid spec. */
#ifndef KVFUZZ_TESTS_FUZZ_FIXTURES_H
#define KVFUZZ_TESTS_FUZZ_FIXTURES_H

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/campaign.h"
#include "kvfuzz/minimize.h"
#include "kvfuzz/mutate.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/test_kernels.h"

static inline kvf_limits case_limits(void) {
    kvf_limits l;
    kvf_limits_default(&l);
    return l;
}

/* A fresh temporary directory, removed (one level deep) by rm_tree. */
static inline void make_tmp(char *out, size_t size) {
    const char *base = getenv("TMPDIR");
    snprintf(out, size, "%s/kvf-test-fuzz-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(out)) {
        CHECK_FAIL_AT("mkdtemp failed");
        out[0] = 0;
    }
}

static inline int count_files(const char *dir, const char *prefix, int *hidden) {
    DIR *d = opendir(dir);
    int n = 0;
    if (hidden) *hidden = 0;
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (e->d_name[0] == '.') {
            if (hidden) (*hidden)++;
            continue;
        }
        if (!prefix || strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    }
    closedir(d);
    return n;
}

static inline void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        /* A path that would not fit is left alone (never a truncated one removed). */
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* A small valid spec: the seed shape with two short sequences. */
static inline kvf_spec small_spec(uint64_t seed) {
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", seed, &err), &err);
    s.recipe.page_size = 16;
    kvf_spec_set_batch(&s, 2, &err);
    s.recipe.num_pages[0] = 3, s.recipe.last_page_len[0] = 5;
    s.recipe.num_pages[1] = 1, s.recipe.last_page_len[1] = 16;
    return s;
}

#endif /* KVFUZZ_TESTS_FUZZ_FIXTURES_H */
