/* fs.h — the FUSE low-level operations of h5logfs (fs.c) and their
 * configuration. */
#ifndef HFS_FS_H
#define HFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stddef.h>

typedef struct hfs_config {
    const char *source; /* the mirrored directory */
    double tick;        /* seconds between journal polls */
    size_t cache_size;  /* bytes of the shared chunk cache */
    int stats;          /* print statistics at unmount */
} hfs_config_t;

/* The daemon's state: configuration, inode table, open handles. Passed to
 * fuse_session_new as the session's userdata (the operations find it with
 * fuse_req_userdata). */
typedef struct hfs_fs hfs_fs_t;

/* Open the source root. NULL on failure, with the reason in err. */
hfs_fs_t *hfs_fs_new(const hfs_config_t *c, char *err, size_t errlen);
/* Free everything (after the session ended). Accepts NULL. */
void hfs_fs_free(hfs_fs_t *fs);
const struct fuse_lowlevel_ops *hfs_fs_ops(void);

#endif
