#!/usr/bin/env python3
"""mkcorpus.py — seed corpora for the libFuzzer harnesses of tests/fuzz, cut
from real files: test_writer (twice: the second run with an index
checkpoint every 2 ticks, seeds named seed-ck-*) and test_frames write
log-layout files at one rank, and bench_flushes --step-attr one whose
checkpoints carry attribute lists (seed-a-*); each harness gets the pieces
it takes (the input layouts are at the top of fuzz_jscan.c, fuzz_tick.c and
fuzz_file.c).

    mkcorpus.py BUILD_DIR [OUT_DIR]     (OUT_DIR: tests/fuzz/corpus)

Writes OUT_DIR/{jscan,tick,file}/seed-* and says what it wrote. Needs the
MPI test programs built (make all) and build/bench/bench_flushes. Regression inputs (crash-*, slow-*,
oom-*) in OUT_DIR are kept; only seed-* files are replaced."""
import glob
import os
import struct
import subprocess
import sys
import tempfile

UB = 4096
JHDR = 64
MAX_SEED = 14 * 1024  # bytes per seed input, about


def u32(b, o):
    return struct.unpack_from('<I', b, o)[0]


def u64(b, o):
    return struct.unpack_from('<Q', b, o)[0]


def pad8(n):
    return (n + 7) & ~7


def frames(j):
    """(pos, type, payload) of every complete frame after the header."""
    pos, out = JHDR, []
    while pos + 24 <= len(j):
        n, t = u32(j, pos), struct.unpack_from('<H', j, pos + 4)[0]
        if pos + 24 + n > len(j):
            break
        out.append((pos, t, j[pos + 24:pos + 24 + n]))
        pos += pad8(24 + n)
    return out


def tick_fields(p):
    """tick, time, nranks, nops, data_off, data_size, table_off, table_size, nrecords"""
    return struct.unpack_from('<QQIIQQQQQ', p, 0)


class LogFile:
    def __init__(self, path):
        self.name = os.path.basename(path)[:-3]
        if os.path.basename(os.path.dirname(path)) == 'c':  # the checkpointed run
            self.name = 'ck-' + self.name
        self.b = open(path, 'rb').read()
        b = self.b
        assert b[:8] == b'\x89H5LOG\r\n', path
        self.id = b[16:32]
        self.jr_off, self.jr_len, flags = u64(b, 32), u64(b, 40), u64(b, 48)
        assert flags & 1, path + ': not closed'
        self.j = b[self.jr_off:self.jr_off + self.jr_len]
        self.seglog = u32(self.j, 40)
        self.fr = frames(self.j)
        self.ticks = [p for (_, t, p) in self.fr if t == 1]

    def frames_upto(self, limit):
        """The journal's first frames while they fit limit bytes."""
        end = JHDR
        for (pos, _, p) in self.fr:
            e = pos + pad8(24 + len(p))
            if e - JHDR > limit and end > JHDR:
                break
            end = e
        return self.j[:end]


def write(d, name, data, made):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)
    made.append((os.path.join(d, name), len(data)))


def jscan_seeds(lf, out, made):
    j = lf.frames_upto(MAX_SEED)
    body = j[JHDR:]
    # embedded, checksums fixed, through a descriptor too, half as a prefix
    write(out, 'seed-%s-embedded' % lf.name, bytes([2 | 4 | (16 << 3)]) + lf.id + body, made)
    # live, the last frame torn in its middle
    last = frames(j)[-1]
    cut = last[0] + 24 + len(last[2]) // 2 - JHDR
    write(out, 'seed-%s-torn' % lf.name, bytes([1 | 2 | 4 | (24 << 3)]) + lf.id + body[:cut], made)
    # as written: checksums not recomputed
    write(out, 'seed-%s-raw' % lf.name, bytes([4 | (8 << 3)]) + lf.id + body, made)


def tick_input(lf, flags, hole, limit):
    region, pays = bytearray(), []
    for p in lf.ticks:
        tick, _, _, _, doff, dsize, toff, tsize, _ = tick_fields(p)
        data, table = lf.b[doff:doff + dsize], lf.b[toff:toff + tsize]
        total = len(region) + sum(4 + len(q) for q in pays)
        if pays and total + len(data) + len(table) + len(p) + 20 > limit:
            break
        region += bytes(pad8(len(region)) - len(region))
        rd = len(region) if dsize else 0
        region += data
        region += bytes(pad8(len(region)) - len(region))
        rt = len(region)
        region += table
        q = bytearray(p)
        struct.pack_into('<Q', q, 24, rd)  # relative to the region: the harness adds 4096
        struct.pack_into('<Q', q, 40, rt)
        pays.append(bytes(q))
    b = bytearray([flags, (lf.seglog - 12) % 256]) + lf.id + hole
    b += struct.pack('<I', len(region)) + region
    for q in pays:
        b += struct.pack('<I', len(q)) + q
    return bytes(b), len(region)


def tick_seeds(lf, out, made):
    nohole = bytes(16)
    b, _ = tick_input(lf, 4 | 8, nohole, MAX_SEED)  # closed, CLOSE frame, nothing fixed
    write(out, 'seed-%s-closed' % lf.name, b, made)
    b, rl = tick_input(lf, 1 | 2, nohole, MAX_SEED)  # live, checksums fixed
    write(out, 'seed-%s-live' % lf.name, b, made)
    # closed with a 1 GiB hole after the region (before the journal)
    hole = struct.pack('<QQ', UB + rl, 1 << 30)
    b, _ = tick_input(lf, 1 | 2 | 4 | 8 | 16, hole, MAX_SEED)
    write(out, 'seed-%s-hole' % lf.name, b, made)


def file_input(lf, flags, nticks):
    """The file with everything but its user block, the data and tables of
    its first nticks ticks and its journal made holes (the 8 largest gaps;
    smaller ones stay). With fewer ticks than the file has, the journal is
    cut after them and a CLOSE frame added (checksums left for the harness
    to fix: flags must say so)."""
    b = bytearray(lf.b)
    ticks = lf.ticks[:nticks]
    j = lf.j
    if nticks < len(lf.ticks):
        end = [pos + pad8(24 + len(p)) for (pos, t, p) in lf.fr if t == 1][nticks - 1]
        close = struct.pack('<QQ', nticks, 0)
        j = j[:end] + struct.pack('<IHH', len(close), 2, 2) + bytes(16) + close
        j = j + bytes(pad8(len(j)) - len(j))
        b[lf.jr_off:lf.jr_off + len(j)] = j
        struct.pack_into('<Q', b, 40, len(j))
    keep = [(0, UB), (lf.jr_off, lf.jr_off + len(j))]
    for p in ticks:
        _, _, _, _, doff, dsize, toff, tsize, _ = tick_fields(p)
        if dsize:
            keep.append((doff, doff + dsize))
        keep.append((toff, toff + tsize))
    keep.sort()
    gaps, at = [], 0
    for (s, e) in keep:
        if s > at:
            gaps.append((s - at, at))
        at = max(at, e)
    if at < len(b):
        gaps.append((len(b) - at, at))
    holes = sorted(sorted(gaps, reverse=True)[:8], key=lambda g: g[1])
    holes = [(a, n) for (n, a) in holes if n >= 64]
    content, at = bytearray(), 0
    for (a, n) in holes:
        content += b[at:a]
        at = a + n
    content += b[at:]
    spec = b''.join(struct.pack('<QQ', a, n) for (a, n) in holes)
    return bytes([flags, len(holes)]) + spec + bytes(content)


def file_seeds(lf, out, made):
    n = len(lf.ticks)
    while n > 1 and len(file_input(lf, 15, n)) > MAX_SEED:
        n -= 1
    write(out, 'seed-%s-fixed' % lf.name, file_input(lf, 15, n), made)
    if n == len(lf.ticks):  # as written, every checksum right
        write(out, 'seed-%s-raw' % lf.name, file_input(lf, 0, n), made)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
               OMPI_MCA_rmaps_base_oversubscribe='1')
    with tempfile.TemporaryDirectory(prefix='h5lcorpus.') as tmp:
        # the third: index checkpoints after every 2 ticks (CHECKPOINT frames,
        # lazily decoded tables: what a reader starts from)
        for prog, args, ck in (('test_writer', ['w', '--ticks', '8', '--seed', '1'], '0'), ('test_frames', ['f'], '0'),
                               ('test_writer', ['c', '--ticks', '8', '--seed', '2'], '2')):
            d = os.path.join(tmp, args[0])
            os.makedirs(d)
            subprocess.run(['mpirun', '--oversubscribe', '-np', '1', os.path.join(build, 'tests', prog), d] + args[1:],
                           env=dict(env, H5L_CKPT_TICKS=ck), check=True, stdout=subprocess.DEVNULL)
        # a global attribute set at every tick, checkpoints every 8 ticks:
        # summaries with attribute lists (format.md 3.5), seeds named seed-a-*
        d = os.path.join(tmp, 'a')
        os.makedirs(d)
        subprocess.run(['mpirun', '--oversubscribe', '-np', '1', os.path.join(build, 'bench', 'bench_flushes'),
                        os.path.join(d, 'a.h5'), '24', '--step-attr'],
                       env=dict(env, H5L_CKPT_TICKS='8'), check=True, stdout=subprocess.DEVNULL)
        files = sorted(glob.glob(os.path.join(tmp, '*', '*.h5')))
        for h in ('jscan', 'tick', 'file'):
            for old in glob.glob(os.path.join(out, h, 'seed-*')):
                os.unlink(old)
        made = []
        for path in files:
            lf = LogFile(path)
            jscan_seeds(lf, os.path.join(out, 'jscan'), made)
            first = len(file_input(lf, 15, 1))
            if first > 4 * MAX_SEED:  # a fuzzer spends its time copying such inputs
                print('%8s %s: no tick or file seeds (its first tick alone makes %d bytes)' % ('', lf.name, first))
                continue
            tick_seeds(lf, os.path.join(out, 'tick'), made)
            file_seeds(lf, os.path.join(out, 'file'), made)
    for (p, n) in made:
        print('%8d %s' % (n, os.path.relpath(p)))
    print('%8d bytes in %d seeds' % (sum(n for (_, n) in made), len(made)))


if __name__ == '__main__':
    main()
