/* Whole-file reading (file.h). */
#include "kvfuzz/file.h"

#include <errno.h>
#include <fcntl.h>
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
