/* h5log/recover.h — making a log-layout file whose writer died into a
 * closed, finalized file (the work of h5logrecover; docs/operations.md).
 *
 * Why in libcore: recovery rewrites the file's HDF5 side with the same
 * anchor and finalize code h5l_close runs, and it must keep every rule of
 * the format (what is trusted, what is rewritten, in which order). A tool
 * that did those steps itself reached into the writer's insides; the tool
 * now parses its arguments and prints what this module reports.
 *
 * Part of libcore's project interface (libcore/include/h5log/): not
 * installed, not exported by libh5log.so. Needs libhdf5, not MPI. */
#ifndef H5LOG_RECOVER_H
#define H5LOG_RECOVER_H

#include "h5log_reader.h"

/* What h5l_recover says, as it happens: level H5L_RECOVER_INFO (the
 * outcome, a line for standard output) or H5L_RECOVER_ERR (a reason,
 * several calls for a failure with several lines). msg has no newline. */
enum { H5L_RECOVER_INFO = 0, H5L_RECOVER_ERR = 1 };
typedef void (*h5l_recover_say_fn)(void *ctx, int level, const char *msg);

/* Recover `path`:
 *   - a live file (no CLOSE, or CLOSE but still live): closed at its last
 *     complete tick and finalized, its sidecar journal removed;
 *   - a closed file written without finalizing: finalized in place;
 *   - a closed, finalized file: left alone (H5L_OK, said so).
 * Refused, the file left as it was: a writer that still runs (its lock
 * file FILE.h5lock held by a live process, or the file's flock taken),
 * H5L_EBUSY; a journal damaged before its end, H5L_ECORRUPT. The writer's
 * stale lock file is removed once the file is recovered. Each step is
 * fsynced before the next, so an interrupted recovery leaves a file the
 * readers still read and h5l_recover can run on again.
 * H5L_OK, or the failing step's code (its reasons given to say first). */
int h5l_recover(const char *path, h5l_recover_say_fn say, void *ctx);

#endif
