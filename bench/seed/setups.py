"""Setups of the seed benchmark: which files are written and read.

A setup maps run names to forms; a form maps a variable name to
(shape, chunks): every variable lives in the root group, float32; an
empty chunk list means the format's default chunking (h5log: contiguous
for a variable without unlimited dimensions, as netCDF-C; h5py: contiguous;
netCDF4: its default). `quick` is `make bench-seed`'s default, sized to
finish in a few minutes on 2 busy cores; the others are picked with
SETUP=name.
"""

Y = ([10, 10], [2, 2])

SETUPS = {
    # 8 MiB per run: three chunkings of a 128^3 variable and a tiny one
    "quick": {
        "run01": {"X": ([128, 128, 128], [128, 128, 1]), "Y": Y},
        "run02": {"X": ([128, 128, 128], [128, 128, 8]), "Y": Y},
        "run03": {"X": ([128, 128, 128], [32, 32, 32]), "Y": Y},
        "run04": {"X": ([128, 128, 128], []), "Y": Y},
    },
    # seconds: what tests/e2e/test_seedbench.py runs
    "tiny": {
        "run01": {"X": ([16, 8, 8], [16, 8, 1]), "Y": Y},
        "run02": {"X": ([16, 8, 8], []), "Y": ([4], [])},
    },
    # the 512^3 series (512 MiB per run): minutes per run
    "x512": {
        "run01": {"X": ([512, 512, 512], [512, 512, 1]), "Y": Y},
        "run02": {"X": ([512, 512, 512], [512, 512, 8]), "Y": Y},
        "run03": {"X": ([512, 512, 512], [512, 512, 64]), "Y": Y},
        "run04": {"X": ([512, 512, 512], [64, 64, 64]), "Y": Y},
        "run05": {"X": ([512, 512, 512], []), "Y": Y},
    },
    # 256^3 (64 MiB per run): between the two
    "x256": {
        "run01": {"X": ([256, 256, 256], [256, 256, 1]), "Y": Y},
        "run02": {"X": ([256, 256, 256], [256, 256, 8]), "Y": Y},
        "run03": {"X": ([256, 256, 256], [64, 64, 64]), "Y": Y},
        "run04": {"X": ([256, 256, 256], []), "Y": Y},
    },
    # many variables: the header and bench_complete patterns
    "many": {
        "run01": {**{"V%03d" % i: ([64, 64], [16, 64]) for i in range(200)}},
        "run02": {**{"V%03d" % i: ([64, 64], []) for i in range(200)}},
    },
}
