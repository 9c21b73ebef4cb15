/* ckchain.h — the reader's way into a checkpointed journal (format.md
 * 3.5, Readers): finding the newest checkpoint near the journal's end and
 * walking its chain back to tick 1, every link checked, before the reader
 * decodes any of them. */
#ifndef H5L_CKCHAIN_H
#define H5L_CKCHAIN_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

/* The checkpoints a reader starts from: an unbroken chain from tick 1 to
 * the newest checkpoint found near the end of the journal, oldest first:
 * where each frame is (the reader reads, decodes and applies them one at a
 * time with h5l_ckpt_decode, which verifies them again). */
typedef struct h5l_ckpt_chain {
    size_t *lens;  /* frame sizes in bytes */
    uint64_t *pos; /* their journal offsets */
    uint64_t *firsts, *lasts; /* their segments */
    uint8_t **sum; /* their summaries' bytes (checksum verified), NULL: none */
    size_t *slen;
    size_t n;
    uint64_t last; /* the newest checkpoint's last tick */
    uint64_t next; /* journal offset right after it */
} h5l_ckpt_chain_t;

/* Find the newest checkpoint among the last H5L_CKPT_SEARCH bytes before
 * journal offset end (journal bytes are at fd offsets base..) and follow
 * its chain back to tick 1, every link's header checksum and fixed fields
 * checked (format.md 3.5, Readers), and the newest one's payload checksum
 * (the others' are checked when they are decoded, not read twice). 1 and *ch filled; 0 when there is none
 * to start from (no checkpoint, or a link missing, damaged or
 * inconsistent: the caller reads the whole journal); H5L_ENOMEM. */
#define H5L_CKPT_SEARCH ((uint64_t)64 << 20)
int h5l_ckpt_chain_read(int fd, uint64_t base, uint64_t end, uint64_t seed, const char *what, h5l_ckpt_chain_t *ch);
void h5l_ckpt_chain_free(h5l_ckpt_chain_t *ch);

#endif
