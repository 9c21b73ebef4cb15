# Where the package looks for libh5log first, after the environment
# (H5LOG_LIBRARY, H5LOG_BUILD). In the source tree this is None;
# `make install` writes the installed library's path here.
LIBRARY = None
