/* ticks.h — the ticks tree: every committed tick of every log-layout file,
 * readable by unmodified tools.
 *
 * Under MNT/.h5logfs-ticks/ (not listed by the root's readdir) the source
 * tree is mirrored with only its directories and log-layout files; each
 * log-layout file REL/NAME is a directory that lists 1.h5, 2.h5, ... for
 * every committed tick, and N.h5 is the canonical file of tick N, immutable
 * (the same content h5logreplay --tick N writes). Why: an analysis that
 * opens a file several times (xarray opens the root and each group apart)
 * sees one state; "what did the file hold at 10:32"; plots of a running job
 * that reproduce.
 *
 * This module resolves names in that tree to inodes (inode.h kinds tdir,
 * tlog, tsnap) and takes the snapshots of old ticks; fs.c answers the FUSE
 * requests. A tsnap inode keeps no snapshot (the kernel may cache
 * thousands of them after an `ls -l`): its handles hold one while open, or,
 * where the kernel skips opens (fs.c), each read takes one; this module
 * keeps the last 8 taken (slots, so a lookup and the reads that follow
 * build the old tick's skeleton once, and a few readers of different ticks
 * do not rebuild theirs on every read). A snapshot rebuilt after it left
 * the slots has the same bytes: an old tick's canonical file is made from
 * scratch, the same every time. Owns the slots' references; inodes are the
 * table's, snapshots lfile.c's. */
#ifndef HFS_TICKS_H
#define HFS_TICKS_H

#include <stddef.h>
#include <stdint.h>
#include "inode.h"

#define HFS_TICKS_NAME ".h5logfs-ticks"

/* Look name up in p, a tdir or a tlog inode: *out (one lookup counted) or
 * an errno (ENOENT for a name the tree does not hold, a tick not
 * committed, or a file that is no longer the source's). */
int hfs_ticks_lookup(hfs_itab_t *t, hfs_inode_t *p, const char *name, hfs_inode_t **out);

/* Whether entry `name` (d_type from readdir) of the tdir p is listed: a
 * directory, or a log-layout file (listed as a directory). */
int hfs_ticks_listed(const hfs_inode_t *p, const char *name, unsigned char d_type);

/* A snapshot for an open or a read of the tsnap n: one of the last 8
 * taken if it is there (slots: lookup-then-read builds a skeleton once,
 * and a file replaced since is still served), else one built from the
 * source, which must still be n's file: an errno (ENOENT: it was
 * replaced). */
int hfs_ticks_open(const hfs_inode_t *n, hfs_snap_t **out);

/* Drop the reused snapshot (before hfs_lfile_shutdown). */
void hfs_ticks_shutdown(void);

/* The name of tick t ("t.h5") into buf; snprintf's return. */
int hfs_ticks_name(uint64_t t, char *buf, size_t cap);

/* The tick a name stands for ("N.h5", N >= 1 in decimal without leading
 * zeros), or 0 if it names none. */
uint64_t hfs_ticks_parse(const char *name);

#endif
