#!/usr/bin/python3
"""Times numpy.save / numpy.load on the same data the Amphora benchmark uses.

usage: numpy_peer.py REPEATS WORKDIR FILE.npy...
Prints one JSON object per file: {"file", "bytes", "save_s": [...], "load_s": [...]}.

usage: numpy_peer.py pass REPEATS WORKDIR FILE.npy
Times numpy.load + sum (and numpy.load with mmap_mode="r" + sum) of FILE's
array saved by numpy.save: right after the save, and after the file was read
once sequentially. Prints {"section": "pass", "written_load_s": [...], ...}.
"""
import json
import os
import sys
import time

import numpy as np

from scratch import retire, touch_scratch


def read_sequentially(path):
    block = bytearray(8 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(block):
            pass


def full_pass(repeats, workdir, source):
    data = np.load(source)
    out = os.path.join(workdir, "numpy-pass.npy")

    def timed(mmap_mode):
        touch_scratch()
        t = time.perf_counter()
        arr = np.load(out, mmap_mode=mmap_mode)
        total = float(arr.sum())
        seconds = time.perf_counter() - t
        del arr  # freed outside the timing, as on the C++ side
        return seconds, total

    times = {"%s_%s_s" % (state, kind): [] for state in ("written", "refreshed") for kind in ("load", "mmap")}
    total = 0.0
    for _ in range(repeats):
        for kind, mmap_mode in (("load", None), ("mmap", "r")):
            retire(out, workdir)
            np.save(out, data)
            seconds, total = timed(mmap_mode)
            times["written_%s_s" % kind].append(seconds)
    for _ in range(repeats):
        for kind, mmap_mode in (("load", None), ("mmap", "r")):
            read_sequentially(out)
            seconds, total = timed(mmap_mode)
            times["refreshed_%s_s" % kind].append(seconds)
    retire(out, workdir)
    print(json.dumps({"section": "pass", "sum": total, **times}), flush=True)


def main():
    if sys.argv[1] == "pass":
        full_pass(int(sys.argv[2]), sys.argv[3], sys.argv[4])
        return
    repeats = int(sys.argv[1])
    workdir = sys.argv[2]
    for path in sys.argv[3:]:
        data = np.load(path)
        out = os.path.join(workdir, "numpy-peer.npy")
        save_s, load_s = [], []
        for _ in range(repeats):
            retire(out, workdir)
            touch_scratch()
            t = time.perf_counter()
            np.save(out, data)
            save_s.append(time.perf_counter() - t)
            touch_scratch()
            t = time.perf_counter()
            back = np.load(out)
            load_s.append(time.perf_counter() - t)
            del back
        size = os.path.getsize(out)
        retire(out, workdir)
        print(json.dumps({"file": path, "bytes": size, "save_s": save_s, "load_s": load_s}), flush=True)


if __name__ == "__main__":
    main()
