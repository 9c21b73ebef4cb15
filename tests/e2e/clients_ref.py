#!/usr/bin/python3
"""The canonical reference of tests/mpi/climate_writer.c, written by netCDF-C.

Usage: clients_ref.py OUT --nranks P [--ticks N]

climate_writer writes its content through libh5log; this script computes
the same content independently with numpy (from the closed-form values and
the documented write semantics: elements never written read as the fill
value, overlapping writes resolve by (tick, rank, call order)) and writes
it with netCDF4-python, i.e. netCDF-C, as an ordinary netCDF-4 file: the
same dimensions, variables (names, types, byte order, shapes, chunking,
fill values via fill_value=), groups and attributes in the same order. That
file is what a netCDF user expects; test_clients.py runs every client on it
and on the mounted log-layout file and requires the same answers.

Variables the writer creates without a chunk shape are left to netCDF-C's
default chunking here on purpose: the canonical file must choose chunks like
netCDF-C does. THE TWO FILES MUST DESCRIBE THE SAME CONTENT: change both
together.
"""
import argparse

import netCDF4
import numpy as np

NLAT, NLON, NLEV, NPART = 8, 12, 3, 16
LEV = np.array([1000.0, 850.0, 500.0])
PRECIP_FILL = -999.0
# netCDF's default fill of a float: the never-written and unwritten cells of
# variables without a fill value of their own
NC_FILL_FLOAT = np.float32(netCDF4.default_fillvals["f4"])


def bands(nranks):
    """Latitude band [j0, j1) of each rank (disjoint, covering all rows)."""
    return [(r * NLAT // nranks, (r + 1) * NLAT // nranks) for r in range(nranks)]


def content(nranks, ticks):
    """{name: ndarray} of every variable after the writer closed the file.
    Cells never written hold the fill value (masked arrays where the
    variable has its own fill value)."""
    t = np.arange(ticks, dtype=np.float64)[:, None, None]
    j = np.arange(NLAT, dtype=np.float64)[None, :, None]
    i = np.arange(NLON, dtype=np.float64)[None, None, :]
    ii, jj = np.meshgrid(np.arange(NLON), np.arange(NLAT))
    land = (3 * ii + 5 * jj) % 7 < 3
    c = {}
    c["time"] = 6.0 * np.arange(ticks, dtype=np.float64)
    c["lat"] = (-87.5 + 25.0 * np.arange(NLAT)).astype(np.float32)
    c["lon"] = (30.0 * np.arange(NLON)).astype(np.float32)
    c["lev"] = LEV.copy()
    k = np.arange(NLEV, dtype=np.float64)[None, :, None, None]
    c["temp"] = (200.0 + t[:, None] + 10.0 * k + 0.5 * j[:, None] + 0.25 * i[:, None]).astype(np.float32)

    tt, jjj, iii = np.meshgrid(np.arange(ticks), np.arange(NLAT), np.arange(NLON), indexing="ij")
    written = ((iii + jjj + tt) % 3 != 0) & ~((jjj == 0) & (iii == 0))
    precip = 1.0 + t + 0.5 * j + 0.25 * i
    c["precip"] = np.ma.masked_array(np.where(written, precip, PRECIP_FILL), mask=~written, fill_value=PRECIP_FILL)

    c["counts"] = (100 * np.arange(ticks)[:, None] + np.arange(NPART)[None, :]).astype(np.int32)
    c["mask"] = land.astype(np.uint8)

    # overlapping writes, replayed in (tick, rank, call order)
    ov = np.zeros((NLAT, NLON), np.int64)
    for tick in range(1, ticks + 1):
        for r, (j0, j1) in enumerate(bands(nranks)):
            if j1 <= j0:
                continue
            a, b = max(j0 - 1, 0), min(j1 + 1, NLAT)
            for row in range(a, b):
                ov[row] = tick * 1000000 + r * 10000 + row * 100 + np.arange(NLON)
            ov[j0] = -(tick * 1000000 + r * 10000 + j0 * 100 + np.arange(NLON))
    c["overlap"] = ov
    c["unused"] = None  # never written
    c["p0"] = np.float64(101325.0)

    sst = (270.0 + 0.5 * t + 0.25 * j - 0.125 * i).astype(np.float32)
    c["ocean/sst"] = np.where(land[None], NC_FILL_FLOAT, sst).astype(">f4")
    c["ocean/surface/flux"] = (100 * t + 12 * j + i - 500).astype(np.int16)
    wind = (0.5 * t + 0.125 * (i - j)).astype(np.float32)
    wind[0] = NC_FILL_FLOAT  # defined after the first flush, written from time index 1
    c["wind"] = wind
    return c


def write(path, nranks, ticks):
    """Write the reference netCDF-4 file; returns content()."""
    c = content(nranks, ticks)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        for name, n in (("time", None), ("lat", NLAT), ("lon", NLON), ("lev", NLEV), ("particle", NPART)):
            ds.createDimension(name, n)
        ds.setncattr("title", "h5logfs client test: climate and particles")
        ds.setncattr("history", "climate_writer: tick %d of %d" % (ticks, ticks))  # final value, first place
        ds.setncattr("Conventions", "CF-1.8")
        ds.setncattr("version", np.array([1, 2, 3], np.int32))

        v = ds.createVariable("time", "f8", ("time",))
        v.setncattr("standard_name", "time")
        v.setncattr("units", "hours since 2000-01-01 00:00:00")
        v.setncattr("calendar", "standard")
        v.setncattr("axis", "T")
        v = ds.createVariable("lat", "f4", ("lat",))
        v.setncattr("units", "degrees_north")
        v.setncattr("long_name", "latitude")
        v = ds.createVariable("lon", "f4", ("lon",))
        v.setncattr("units", "degrees_east")
        v.setncattr("long_name", "longitude")
        v = ds.createVariable("lev", "f8", ("lev",))
        v.setncattr("units", "hPa")
        v.setncattr("positive", "down")

        v = ds.createVariable("temp", "f4", ("time", "lev", "lat", "lon"), chunksizes=(1, NLEV, NLAT // 2, NLON))
        v.setncattr("long_name", "air temperature")
        v.setncattr("units", "K")
        v.setncattr("code", np.int32(130))
        v.setncattr("weights", np.array([0.25, 0.75]))
        v.setncattr("comment", "added after two ticks")
        v = ds.createVariable("precip", "f8", ("time", "lat", "lon"), fill_value=PRECIP_FILL)
        v.setncattr("long_name", "precipitation")
        v.setncattr("units", "mm/day")
        v = ds.createVariable("counts", "i4", ("time", "particle"))
        v.setncattr("long_name", "particles per bin")
        v = ds.createVariable("mask", "u1", ("lat", "lon"))
        v.setncattr("long_name", "land mask")
        ds.createVariable("overlap", "i8", ("lat", "lon"))
        v = ds.createVariable("unused", "f4", ("lat", "lon"))
        v.setncattr("long_name", "never written")
        v = ds.createVariable("p0", "f8", ())
        v.setncattr("units", "Pa")

        oc = ds.createGroup("ocean")
        oc.setncattr("description", "ocean component")
        v = oc.createVariable("sst", ">f4", ("time", "lat", "lon"), endian="big")
        v.setncattr("units", "K")
        v.setncattr("long_name", "sea surface temperature")
        sf = oc.createGroup("surface")
        sf.setncattr("level", np.int32(0))
        v = sf.createVariable("flux", "i2", ("time", "lat", "lon"), chunksizes=(2, 4, 6))
        v.setncattr("units", "W m-2")
        v.setncattr("valid_range", np.array([-500, 1500], np.int16))

        v = ds.createVariable("wind", "f4", ("time", "lat", "lon"))  # defined late in the writer
        v.setncattr("units", "m s-1")
        v.setncattr("long_name", "wind speed")

        # data: raw values, fill included; no automatic masking on the way in
        for name, a in c.items():
            if a is None:
                continue
            var = ds[name]
            var.set_auto_maskandscale(False)
            if np.ndim(a) == 0:
                var.assignValue(a)
            else:
                var[:] = np.ma.getdata(a)
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--nranks", type=int, required=True)
    ap.add_argument("--ticks", type=int, default=6)
    a = ap.parse_args()
    write(a.out, a.nranks, a.ticks)


if __name__ == "__main__":
    main()
