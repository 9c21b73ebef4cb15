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

/* Open the source root. On failure writes the reason into err. */
int hfs_fs_init(const hfs_config_t *c, char *err, size_t errlen);
void hfs_fs_fini(void);
const struct fuse_lowlevel_ops *hfs_fs_ops(void);

#endif
