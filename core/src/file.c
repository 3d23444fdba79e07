/* Whole-file reading and atomic writing (file.h). */
#define _GNU_SOURCE /* nftw's FTW_DEPTH and FTW_PHYS */
#include "kvfuzz/file.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int kvf_read_file_max(const char *path, size_t max_size, char **data, size_t *size,
                      kvf_error *err) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return kvf_error_set(err, e == ENOMEM ? KVF_ENOMEM : KVF_EIO, "cannot read %s: %s", path,
                             strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kvf_error_set(err, KVF_EIO, "cannot read %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return kvf_error_set(err, KVF_EINVAL, "%s is %s, not a regular file", path,
                             kind_of(st.st_mode));
    }
    if ((uint64_t)st.st_size > (uint64_t)max_size) {
        close(fd);
        return kvf_error_set(err, KVF_ELIMIT, "%s is %lld bytes, more than the %zu bytes allowed",
                             path, (long long)st.st_size, max_size);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    /* The size from fstat sizes the buffer; a file that grows while read is cut at the limit. */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return kvf_error_set(err, KVF_ENOMEM, "cannot read %s: out of memory for %zu bytes", path,
                             cap);
    }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max_size) break;
            size_t ncap = cap * 2 > max_size + 1 ? max_size + 1 : cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                close(fd);
                return kvf_error_set(err, KVF_ENOMEM, "cannot read %s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return kvf_error_set(err, KVF_EIO, "cannot read %s: %s", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (n > max_size) {
        free(buf);
        return kvf_error_set(err, KVF_ELIMIT, "%s grew past the %zu bytes allowed while read", path,
                             max_size);
    }
    buf[n] = 0;
    *data = buf;
    *size = n;
    return 0;
}

int kvf_read_file(const char *path, char **data, size_t *size) {
    kvf_error err = {0};
    int rc = kvf_read_file_max(path, KVF_READ_FILE_DEFAULT_MAX, data, size, &err);
    if (rc == 0) return 0;
    errno = rc == KVF_ENOMEM ? ENOMEM : rc == KVF_EIO ? (errno ? errno : EIO) : EINVAL;
    return -1;
}

/* The directory entry of the rename must reach the disk too, or a crash can bring back the old
 * name. Errors here are ignored: some file systems refuse fsync on a directory, and the data
 * itself is already durable. */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

/* Puts the finished temporary file in place: rename() replaces path; link() leaves an existing
 * path alone (EEXIST), which is how the first of several writers of one name wins. */
static int place(const char *tmp, const char *path, kvf_write_mode mode, int *created) {
    if (mode == KVF_WRITE_REPLACE) return rename(tmp, path);
    if (link(tmp, path) != 0) {
        if (errno != EEXIST) return -1;
        *created = 0;
    }
    unlink(tmp);
    return 0;
}

int kvf_write_atomic_ex(const char *path, kvf_write_mode mode, int (*fill)(FILE *f, void *ctx),
                        void *ctx, int *created, kvf_error *err) {
    int made = 1;
    if (created) *created = 0;
    /* rename() would put a regular file in place of a device, FIFO or socket (as root, even of
     * /dev/full): such a path is not a file to write. */
    struct stat st;
    /* A folder too: rename() would refuse it, but with an errno that names no folder ("." is
     * "Device or resource busy"). */
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return kvf_error_set(err, KVF_EINVAL, "cannot write %s: it is %s, not a regular file", path,
                             kind_of(st.st_mode));
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) return kvf_error_set(err, KVF_ENOMEM, "out of memory writing %s", path);
    /* Same directory as the target: rename() is atomic only within one file system. The name
     * starts with a dot, so directory listings of cases and corpora skip a write in progress. */
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    snprintf(tmp, n + 16, "%.*s.%s.tmp.XXXXXX", (int)dir_len, path, path + dir_len);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return kvf_error_set(err, KVF_EIO, "cannot write %s: %s", path, strerror(e));
    }
    fchmod(fd, 0644); /* mkstemp makes 0600; these files are meant to be shared */
    FILE *f = fdopen(fd, "w");
    int rc = f ? 0 : -1, saved = errno;
    if (rc == 0) {
        errno = 0;
        rc = fill(f, ctx);
        saved = errno ? errno : EIO;
    }
    if (rc == 0 && (fflush(f) != 0 || ferror(f))) rc = -1, saved = errno;
    if (rc == 0 && fsync(fd) != 0) rc = -1, saved = errno;
    if (f ? fclose(f) != 0 : close(fd) != 0) {
        if (rc == 0) rc = -1, saved = errno;
    }
    if (rc == 0 && place(tmp, path, mode, &made) != 0) rc = -1, saved = errno;
    if (rc) {
        unlink(tmp);
        free(tmp);
        return kvf_error_set(err, saved == ENOMEM ? KVF_ENOMEM : KVF_EIO, "cannot write %s: %s",
                             path, strerror(saved));
    }
    free(tmp);
    if (made) sync_parent_dir(path);
    if (created) *created = made;
    return 0;
}

int kvf_write_atomic(const char *path, int (*fill)(FILE *f, void *ctx), void *ctx, kvf_error *err) {
    return kvf_write_atomic_ex(path, KVF_WRITE_REPLACE, fill, ctx, NULL, err);
}

typedef struct bytes_ctx {
    const void *data;
    size_t size;
} bytes_ctx;

static int fill_bytes(FILE *f, void *ctx) {
    const bytes_ctx *b = ctx;
    return b->size && fwrite(b->data, 1, b->size, f) != b->size ? -1 : 0;
}

int kvf_write_atomic_bytes_ex(const char *path, kvf_write_mode mode, const void *data, size_t size,
                              int *created, kvf_error *err) {
    bytes_ctx b = {data, size};
    return kvf_write_atomic_ex(path, mode, fill_bytes, &b, created, err);
}

int kvf_write_atomic_bytes(const char *path, const void *data, size_t size, kvf_error *err) {
    return kvf_write_atomic_bytes_ex(path, KVF_WRITE_REPLACE, data, size, NULL, err);
}

int kvf_glob_escape(const char *path, char *out, size_t size) {
    if (size == 0) return -1;
    size_t at = 0;
    for (const char *p = path; *p; p++) {
        int special = *p == '*' || *p == '?' || *p == '[' || *p == '\\';
        if (at + (size_t)special + 1 >= size) return -1;
        if (special) out[at++] = '\\';
        out[at++] = *p;
    }
    out[at] = 0;
    return 0;
}

int kvf_mkdirs(const char *dir, kvf_error *err) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return kvf_error_set(err, KVF_EIO, "the path %.80s... is too long", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return kvf_error_set(err, KVF_EIO, "cannot create %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return kvf_error_set(err, KVF_EIO, "cannot create %s: %s", path, strerror(errno));
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return kvf_error_set(err, KVF_EIO, "%s is not a directory", path);
    return 0;
}

/* Depth first, so a folder is empty when its turn comes; a failure does not stop the walk. */
static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    (void)remove(path);
    return 0;
}

int kvf_remove_tree(const char *dir) {
    struct stat st;
    (void)nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return lstat(dir, &st) == 0 ? -1 : 0;
}
