#!/usr/bin/python3
"""Times numpy.save / numpy.load on the same data the Amphora benchmark uses.

usage: numpy_peer.py REPEATS WORKDIR FILE.npy...
Prints one JSON object per file: {"file", "bytes", "save_s": [...], "load_s": [...]}.
"""
import json
import os
import sys
import time

import numpy as np

SCRATCH = 64 << 20


def touch_scratch():
    # Memory left idle is handed back to the host; touching a block first keeps
    # both peers on warm memory, as the C++ side does.
    block = np.empty(SCRATCH, dtype=np.uint8)
    block.fill(1)
    del block


def main():
    repeats = int(sys.argv[1])
    workdir = sys.argv[2]
    for path in sys.argv[3:]:
        data = np.load(path)
        out = os.path.join(workdir, "numpy-peer.npy")
        save_s, load_s = [], []
        for _ in range(repeats):
            if os.path.exists(out):
                os.unlink(out)
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
        os.unlink(out)
        print(json.dumps({"file": path, "bytes": size, "save_s": save_s, "load_s": load_s}), flush=True)


if __name__ == "__main__":
    main()
