/* What a replay checks before it starts (kvfuzz/replay.h, "before a replay"): a statistics file
 * that would replace a case to replay, and the kernel and rule the findings' reports record. */
#include "kvfuzz/replay.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

long kvf_replay_stats_clash(const char *stats_path, char *const *paths, size_t n, int *report) {
    struct stat sst;
    if (!stats_path || stat(stats_path, &sst) != 0) return -1;
    for (size_t i = 0; i < n; i++) {
        char json[4096];
        size_t len = strlen(paths[i]);
        snprintf(json, sizeof json, "%.*s.json", (int)(len > 5 ? len - 5 : len), paths[i]);
        const char *mine[2] = {paths[i], json};
        for (int m = 0; m < 2; m++) {
            struct stat cst;
            if (stat(mine[m], &cst) == 0 && cst.st_dev == sst.st_dev && cst.st_ino == sst.st_ino) {
                *report = m;
                return (long)i;
            }
        }
    }
    return -1;
}

int kvf_replay_recorded(char *const *paths, size_t n, kvf_report_reader read, char *kernel,
                        size_t ksize, char *rule, size_t rsize) {
    kernel[0] = rule[0] = 0;
    for (size_t i = 0; i < n; i++) {
        /* A report that cannot be read (a FIFO, malformed) is no record: the default kernel. */
        json_t *j = NULL;
        if (read(paths[i], &j, NULL)) return 0;
        const char *k = j ? json_string_value(json_object_get(j, "kernel")) : NULL;
        const char *r = j ? json_string_value(json_object_get(j, "rule")) : NULL;
        int same = k && (kernel[0] == 0 || strcmp(kernel, k) == 0) && strlen(k) < ksize;
        if (same) {
            snprintf(kernel, ksize, "%s", k);
            if (r && !rule[0] && strlen(r) < rsize) snprintf(rule, rsize, "%s", r);
        }
        json_decref(j);
        if (!same) return 0;
    }
    return n > 0;
}
