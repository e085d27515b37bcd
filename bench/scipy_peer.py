#!/usr/bin/python3
"""The SciPy side of the Amphora benchmark's sparse section.

usage:
  scipy_peer.py REPEATS WORKDIR INPUT.npz

Loads the matrix amphora_bench wrote, then times scipy.sparse.save_npz
(uncompressed, as the issue asks) and load_npz followed by a sum over the
stored values (so neither side gets unread pages for free). Prints one JSON
object: seconds per repeat, the file size, and checksums the C++ side compares
with its own.
"""
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

from scratch import retire, touch_scratch


def main():
    repeats, workdir, source = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    matrix = sp.load_npz(source)
    out = os.path.join(workdir, "sparse-peer.npz")
    save_s = []
    for _ in range(repeats):
        retire(out, workdir)
        touch_scratch()
        t = time.perf_counter()
        sp.save_npz(out, matrix, compressed=False)
        save_s.append(time.perf_counter() - t)
    del matrix
    load_s = []
    total = 0.0
    for _ in range(repeats):
        touch_scratch()
        t = time.perf_counter()
        back = sp.load_npz(out)
        total = float(back.data.sum())
        load_s.append(time.perf_counter() - t)
    checks = {"nnz": int(back.nnz), "shape": list(back.shape), "format": back.format, "data_sum": total,
              "indices_sum": int(back.indices.sum(dtype=np.int64)), "index_dtype": back.indices.dtype.name}
    size = os.path.getsize(out)
    retire(out, workdir)
    print(json.dumps({"section": "sparse", "save_s": save_s, "load_s": load_s, "bytes": size, **checks}), flush=True)


if __name__ == "__main__":
    main()
