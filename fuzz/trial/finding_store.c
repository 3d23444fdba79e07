/* The findings folder (outcome.h, "findings"): a finding's case and report saved under its
 * signature through core's atomic writer (docs/design.md §8), the writability check a campaign
 * starts with, and the removal of temporary files an interrupted write left behind. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/file.h"
#include "kvfuzz/outcome.h"

/* The finding's report as JSON text in memory: made before anything is written, so a report
 * that cannot be made leaves no case without its report behind. */
static int report_text(const kvf_outcome *out, const char *kernel, const kvf_spec *spec,
                       const kvf_case *c, const json_t *extra, char **text, size_t *size,
                       kvf_error *err) {
    *text = NULL;
    *size = 0;
    FILE *mem = open_memstream(text, size);
    if (!mem) return kvf_error_set(err, KVF_ENOMEM, "out of memory writing a finding report");
    int jrc = kvf_outcome_json(mem, out, kernel, spec, c, extra);
    if (fclose(mem) != 0 || jrc) {
        free(*text);
        *text = NULL;
        return kvf_error_set(err, KVF_ENOMEM, "out of memory writing a finding report");
    }
    return 0;
}

int kvf_finding_save(const char *dir, const kvf_outcome *out, const char *kernel,
                     const kvf_spec *spec, const kvf_case *c, const json_t *extra, int *is_new,
                     char *path_out, size_t path_size, kvf_error *err) {
    *is_new = 0;
    int rc = kvf_mkdirs(dir, err);
    if (rc) return rc;
    uint64_t h = kvf_outcome_signature(out, kernel, NULL, 0);
    char name[128], final_case[4200], final_json[4200];
    snprintf(name, sizeof name, "%s-%012" PRIx64, kvf_finding_class_name(out->finding),
             h & UINT64_C(0xFFFFFFFFFFFF));
    snprintf(final_case, sizeof final_case, "%s/%s.kvfz", dir, name);
    snprintf(final_json, sizeof final_json, "%s/%s.json", dir, name);
    if (path_out && path_size) snprintf(path_out, path_size, "%s", final_case);
    if (access(final_case, F_OK) == 0) return 0; /* seen before: the common case, no I/O */

    uint8_t *bytes;
    size_t size;
    if ((rc = kvf_spec_encode(spec, &bytes, &size, err))) return rc;
    char *json;
    size_t json_size;
    if ((rc = report_text(out, kernel, spec, c, extra, &json, &json_size, err))) {
        free(bytes);
        return rc;
    }
    /* The case goes into place first and without replacing: of two writers of the same
     * signature (threads or campaigns) the first wins, and only the winner writes the report,
     * so a report always describes the case beside it. */
    rc = kvf_write_atomic_bytes_ex(final_case, KVF_WRITE_KEEP_EXISTING, bytes, size, is_new, err);
    if (!rc && *is_new &&
        (rc = kvf_write_atomic_bytes(
             final_json, json, json_size,
             err))) { /* no case without its report: the next save of this signature starts over */
        unlink(final_case);
        *is_new = 0;
    }
    free(bytes);
    free(json);
    return rc;
}

/* Whether name is one of the temporary names kvfuzz's writers use: ".NAME.tmp.XXXXXX"
 * (mkstemp's six characters: core's atomic writer), ".NAME.tmp.PID.N" (the finding writer of
 * earlier kvfuzz versions, whose leftovers may still sit in a findings folder) or
 * ".kvfuzz-write-check.XXXXXX" (kvf_fuzz_check_writable). */
static int is_temp_name(const char *name) {
    size_t n = strlen(name);
    if (name[0] != '.' || n < 8) return 0;
    if (strncmp(name, ".kvfuzz-write-check.", 20) == 0) return n == 26;
    const char *t = NULL;
    for (const char *p = strstr(name, ".tmp."); p; p = strstr(p + 1, ".tmp."))
        t = p; /* the last ".tmp." */
    if (!t || t == name) return 0;
    const char *tail = t + 5;
    size_t tn = strlen(tail), alnum = 0, digits = 0, dots = 0;
    for (const char *p = tail; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits++;
        else if (*p == '.')
            dots++;
        if ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
            alnum++;
    }
    if (tn == 6 && alnum == 6) return 1;                                           /* mkstemp */
    return dots == 1 && digits == tn - 1 && tail[0] != '.' && tail[tn - 1] != '.'; /* PID.N */
}

int kvf_fuzz_remove_stale_temps(const char *dir, double min_age_s) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_temp_name(e->d_name)) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (difftime(now, st.st_mtime) < min_age_s) continue;
        if (unlink(path) == 0) removed++;
    }
    closedir(d);
    return removed;
}

int kvf_fuzz_check_writable(const char *dir, kvf_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.kvfuzz-write-check.XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0)
        return kvf_error_set(err, KVF_EIO, "the findings folder %s is not writable: %s", dir,
                             strerror(errno));
    int bad = write(fd, "x", 1) != 1;
    int saved = errno;
    close(fd);
    unlink(path);
    if (bad)
        return kvf_error_set(err, KVF_EIO, "the findings folder %s is not writable: %s", dir,
                             strerror(saved));
    return 0;
}
