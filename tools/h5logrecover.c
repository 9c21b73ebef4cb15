/* h5logrecover — make a log-layout file whose writer crashed into a closed,
 * finalized file at its last complete tick, readable by plain libhdf5
 * clients (h5py, netCDF, ncdump) as well as by the project's tools.
 *
 * Usage: h5logrecover FILE
 *
 * The work is libcore's h5l_recover (h5log/recover.h: what is trusted,
 * what is rewritten, in which order); this program parses its argument
 * and prints what the recovery reports: the outcome on standard output,
 * reasons on standard error. */
#include <stdio.h>
#include <string.h>
#include <hdf5.h>

#include "h5log/recover.h"

static void usage(FILE *o)
{
    fprintf(o, "usage: h5logrecover FILE\n"
               "Close the log-layout FILE whose writer crashed, at its last complete tick, and finalize it:\n"
               "plain HDF5 and netCDF readers then read its newest data without h5logfs.\n"
               "A closed file written without finalization is finalized.\n"
               "  -h, --help  this text\n"
               "Exit status: 0 done (or nothing to do), 1 error (the file is left as it was), 2 usage.\n");
}

static void print(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level == H5L_RECOVER_INFO)
        printf("%s\n", msg);
    else
        fprintf(stderr, "h5logrecover: %s\n", msg);
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        usage(stderr);
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages say what failed */
    int rc = h5l_recover(argv[1], print, NULL);
    H5close();
    return rc ? 1 : 0;
}
