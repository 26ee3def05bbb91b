"""lazyfs: this project's FUSE file system for `power` faults, after Jepsen's
LazyFS (dsrhaslab/lazyfs): a passthrough over a backing directory that keeps
what was written and not yet fsynced apart, in its own memory, and throws it
away on command ("drop"), which is what a power failure does to a page cache.

This package runs on bare hosts with only python3, libfuse3 and the single
file `mfusepy.py` (a ctypes binding of libfuse, pure Python): keep every
module here standard-library only, except `mounts.py` (the harness side).
`nemesis/__init__.py` must stay import-free for the same reason.
"""
