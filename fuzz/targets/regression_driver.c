/* The plain regression driver every fuzz target also links against (no libFuzzer needed, any
 * C compiler): replays the files and directories given on the command line through
 * LLVMFuzzerTestOneInput, so corpora and findings can be checked anywhere, under ASan + UBSan
 * in CI. Arguments starting with "--" are the target's options (handed to
 * LLVMFuzzerInitialize); those starting with a single "-" are libFuzzer flags and are ignored,
 * so a libFuzzer command line replays unchanged. Directories are read one level deep, in name
 * order. Exit status: 0, 1 when the target reported findings in keep-going mode, 2 when a path
 * cannot be read; a finding otherwise aborts, as under libFuzzer. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvfuzz/file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);
__attribute__((weak)) int kvf_harness_findings(void);

static int replay_file(const char *path) {
    char *buf;
    size_t n;
    if (kvf_read_file(path, &buf, &n)) {
        fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(stderr, "replaying %s (%zu bytes)\n", path, n);
    /* An exact-size copy, so ASan sees a read past the end of the input. */
    uint8_t *exact = malloc(n ? n : 1);
    if (exact && n) memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, size_t *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn) break;
        names = nn;
        names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!names[n]) break;
        sprintf(names[n], "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(names[i])) rc = -1;
            (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    size_t count = 0;
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "cannot read %s: %s\n", argv[i], strerror(errno));
            bad = 1;
        } else if (S_ISDIR(st.st_mode)) {
            if (replay_dir(argv[i], &count)) bad = 1;
        } else {
            if (replay_file(argv[i])) bad = 1;
            count++;
        }
    }
    int findings = kvf_harness_findings ? kvf_harness_findings() : 0;
    fprintf(stderr, "replayed %zu input(s)%s\n", count, findings ? ", with findings" : "");
    if (bad) return 2;
    return findings ? 1 : 0;
}
