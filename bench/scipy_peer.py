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

import numpy as np
import scipy.sparse as sp

from scratch import retire, time_repeats, time_saves


def main():
    repeats, workdir, source = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    matrix = sp.load_npz(source)
    out = os.path.join(workdir, "sparse-peer.npz")
    save_s = time_saves(lambda p: sp.save_npz(p, matrix, compressed=False), out, repeats, workdir)
    del matrix

    def load_and_sum():
        back = sp.load_npz(out)
        return back, float(back.data.sum())

    load_s, (back, total) = time_repeats(load_and_sum, repeats)
    checks = {"nnz": int(back.nnz), "shape": list(back.shape), "format": back.format, "data_sum": total,
              "indices_sum": int(back.indices.sum(dtype=np.int64)), "index_dtype": back.indices.dtype.name}
    size = os.path.getsize(out)
    retire(out, workdir)
    print(json.dumps({"section": "sparse", "save_s": save_s, "load_s": load_s, "bytes": size, **checks}), flush=True)


if __name__ == "__main__":
    main()
