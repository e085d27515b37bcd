"""Scratch files of the Python peers, moved aside instead of deleted, and
the warm-memory touch each peer makes before a timed operation.

On an ext4 without a journal the inode allocator skips every inode freed in
the last minutes, one lookup each; deleting scratch files between repeats
would slow every later file creation on both sides of the comparison. Files
are truncated (freeing their pages) and moved into WORKDIR/retired, which the
C++ driver deletes when the whole benchmark ends.
"""
import itertools
import os
import time

import numpy as np

_count = itertools.count(1)
SCRATCH = 64 << 20


def touch_scratch():
    """Touches and frees a 64 MiB block: memory left idle is handed back to the
    host, so both sides of a comparison start on warm memory, as the C++ side
    does before each timed operation."""
    block = np.empty(SCRATCH, dtype=np.uint8)
    block.fill(1)
    del block


def retire(path, workdir):
    """Truncates the file or tree at `path` and moves it into WORKDIR/retired;
    does nothing if `path` does not exist."""
    if not os.path.lexists(path):
        return
    # Links are moved aside, never followed: only the peer's own files are truncated.
    if os.path.isdir(path) and not os.path.islink(path):
        for root, _, files in os.walk(path):
            for name in files:
                if not os.path.islink(os.path.join(root, name)):
                    os.truncate(os.path.join(root, name), 0)
    elif os.path.isfile(path) and not os.path.islink(path):
        os.truncate(path, 0)
    parked = os.path.join(workdir, "retired")
    os.makedirs(parked, exist_ok=True)
    os.rename(path, os.path.join(parked, "py-%d-%d-%s" % (os.getpid(), next(_count), os.path.basename(path))))


def time_saves(save, path, repeats, workdir):
    """Seconds per repeat of save(path), each into a fresh `path` (the one
    before retired) on warm memory; the last file is kept."""
    seconds = []
    for _ in range(repeats):
        retire(path, workdir)
        touch_scratch()
        t = time.perf_counter()
        save(path)
        seconds.append(time.perf_counter() - t)
    return seconds


def time_repeats(load, repeats):
    """Seconds per repeat of load() on warm memory, and what its last call
    returned (the checks of the pass it makes over what it loaded)."""
    seconds, result = [], None
    for _ in range(repeats):
        touch_scratch()
        t = time.perf_counter()
        result = load()
        seconds.append(time.perf_counter() - t)
    return seconds, result
