/* h5log/query.h — what the daemon's skeletons ask of a reader and of its
 * schema beyond the installed reader API (h5log_reader.h): questions
 * answered in O(1) or O(log n), asked of every variable at every tick of a
 * live file, where the installed API would enumerate.
 *
 * Part of libcore's project interface (libcore/include/h5log/): the
 * daemon and the tools link libcore statically and may use these; they
 * are not installed and libh5log.so does not export them. */
#ifndef H5LOG_QUERY_H
#define H5LOG_QUERY_H

#include <stddef.h>
#include <stdint.h>
#include "h5log_reader.h"

/* The chunks of variable objid holding a record of tick <= tick, counted
 * in O(1) into *n when the reader can: tick is its newest, no index
 * checkpoint map, no coarse cells. H5L_ESTATE when it cannot (enumerate:
 * h5l_reader_chunk_runs). Read lock held. */
int h5l_reader_chunk_count(h5l_reader_t *r, uint64_t tick, uint32_t objid, uint64_t *n);

/* *n when the chunks of objid holding a record of tick <= tick are
 * exactly those whose first chunk coordinate is < *n and whose others are
 * 0, known in O(1) (the conditions of h5l_reader_chunk_count); H5L_ESTATE
 * when not (not such a prefix, or not known). Read lock held. */
int h5l_reader_chunk_prefix(h5l_reader_t *r, uint64_t tick, uint32_t objid, uint64_t *n);

/* Does chunk coord of objid hold a record of tick <= tick? Only when
 * h5l_reader_chunk_count could count. Read lock held. */
int h5l_reader_has_chunk(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *coord);

/* The bytes the reader's index of records holds (records, boxes,
 * buckets, tables): what a live file costs the daemon per record loaded.
 * For the daemon's statistics. */
uint64_t h5l_reader_index_bytes(h5l_reader_t *r);

/* The index in s->attrs of the first attribute version set after tick
 * (nattrs if none): the history is in tick order, so versions [0, i) are
 * those set at or before tick. O(log n). */
size_t h5l_schema_attrs_after(const h5l_schema_t *s, uint64_t tick);

#endif
