/* snaphelp.h — for the daemon's unit tests: the registry started, one
 * source file loaded and a snapshot of its newest tick taken, the way the
 * daemon does on a lookup; and the matching teardown. Include after
 * tharness.h and lfile.h. */
#ifndef SNAPHELP_H
#define SNAPHELP_H

#include <stdio.h>
#include <sys/stat.h>

/* The newest snapshot of the file at path with a cache of cache_limit
 * bytes, *lf its file; NULL (reason printed, registry shut down) if any
 * step fails — each step is also a CHECK. */
static hfs_snap_t *snap_open(const char *path, size_t cache_limit, hfs_lfile_t **lf)
{
    CHECK_EQ(hfs_lfile_init(cache_limit), 0);
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    hfs_snap_t *s = NULL;
    h5l_err_t e = {0};
    *lf = NULL;
    CHECK_EQ(hfs_lfile_get(path, st.st_dev, st.st_ino, lf, &e), 0);
    if (*lf) CHECK_EQ(hfs_lfile_snapshot(*lf, &s, &e), 0);
    if (!s) {
        fprintf(stderr, "  %s: %s\n", path, e.msg);
        hfs_lfile_unref(*lf);
        hfs_lfile_shutdown();
    }
    return s;
}

/* Undo snap_open. */
static void snap_close(hfs_snap_t *s, hfs_lfile_t *lf)
{
    hfs_snap_unref(s);
    hfs_lfile_unref(lf);
    hfs_lfile_shutdown();
}

#endif
