"""libh5log.so exports its API and nothing else.

Why: the shared library exported ~119 symbols for ~41 API functions — every
internal helper (h5l_index_insert, h5l_frame_encode, ...) became part of
what applications could link against and what a later version would have to
keep. The public headers mark the API with H5L_API; the library is built
with -fvisibility=hidden. Here the dynamic symbol table of the built library
is compared with the functions the public headers declare.
"""
import os
import re
import subprocess

from h5ltest import BUILD

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADERS = ["h5log.h", "h5log_reader.h", "h5log_common.h"]


def declared():
    names = set()
    for h in HEADERS:
        text = open(os.path.join(ROOT, "libcore", "include", h)).read()
        names |= set(re.findall(r"^H5L_API [^;(]*?\b(h5l_\w+)\(", text, re.M))
    return names


def exported():
    out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(BUILD, "libh5log.so")], capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[-2] in ("T", "W")}


def test_exports_are_the_declared_api():
    d, e = declared(), exported()
    assert len(d) > 30, d
    assert e == d, f"exported but not API: {sorted(e - d)}; API but not exported: {sorted(d - e)}"


def test_every_public_function_is_marked():
    """A function declared in a public header without H5L_API would be
    hidden: an application could not link it."""
    for h in HEADERS:
        text = open(os.path.join(ROOT, "libcore", "include", h)).read()
        for m in re.finditer(r"^(?!H5L_API)[A-Za-z_][\w \*]*\b(h5l_\w+)\(", text, re.M):
            line = text[m.start():text.index("\n", m.start())]
            assert line.lstrip().startswith(("#", "/*", "*", "static inline")), f"{h}: {line}"
