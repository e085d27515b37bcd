#!/usr/bin/python3
"""The pandas side of the Amphora benchmark's table section.

usage:
  pandas_peer.py REPEATS WORKDIR INPUT_DIR

INPUT_DIR holds the columns amphora_bench wrote: id.npy (int64), value.npy
(float64), flag.npy (bool), word_codes.npy (int32) and words.txt (the
vocabulary, one word per line); the word column is vocabulary[code], one
Python str per distinct word, as a program holding the words would have.
Times DataFrame.to_pickle / pandas.read_pickle, DataFrame.to_hdf /
pandas.read_hdf (PyTables, Debian's python3-tables, which `make bench`
installs) in the fixed and table formats, each without compression and with
blosc:lz4 at level 5, and to_parquet / read_parquet when pyarrow is
installed; each load followed by the same pass over every column the C++
side makes. Prints one JSON object.
"""
import json
import os
import sys
import warnings

import numpy as np
import pandas as pd

from scratch import retire, time_repeats, time_saves


def one_pass(df):
    return {"id_sum": int(df["id"].sum()), "value_sum": float(df["value"].sum()), "flags": int(df["flag"].sum()),
            "word_bytes": int(df["word"].str.len().sum())}


def timed(save, load, path, repeats, workdir, df):
    save_s = time_saves(lambda p: save(df, p), path, repeats, workdir)
    load_s, checks = time_repeats(lambda: one_pass(load(path)), repeats)
    size = os.path.getsize(path)
    retire(path, workdir)
    return {"save_s": save_s, "load_s": load_s, "bytes": size, **checks}


def main():
    repeats, workdir, inputs = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with open(os.path.join(inputs, "words.txt"), encoding="utf-8") as f:
        vocabulary = np.array(f.read().split("\n"), dtype=object)
    df = pd.DataFrame({
        "id": np.load(os.path.join(inputs, "id.npy")),
        "value": np.load(os.path.join(inputs, "value.npy")),
        "flag": np.load(os.path.join(inputs, "flag.npy")),
        "word": vocabulary[np.load(os.path.join(inputs, "word_codes.npy"))],
    })
    out = {"section": "table", "rows": len(df)}
    out["pickle"] = timed(lambda d, p: d.to_pickle(p), pd.read_pickle, os.path.join(workdir, "table.pkl"),
                          repeats, workdir, df)
    try:
        import tables  # noqa: F401
    except ImportError:
        tables = None
    if tables is not None:
        # Fixed format pickles the object (string) column: PyTables says so
        # in a PerformanceWarning each save, which is the point, not news.
        warnings.simplefilter("ignore", tables.NaturalNameWarning)
        warnings.simplefilter("ignore", pd.errors.PerformanceWarning)
        for fmt in ("fixed", "table"):
            for complib in (None, "blosc:lz4"):
                kw = {"format": fmt, "key": "t"}
                if complib:
                    kw.update(complib=complib, complevel=5)
                out[f"hdf_{fmt}" + ("_blosc_lz4" if complib else "")] = timed(
                    lambda d, p, kw=kw: d.to_hdf(p, mode="w", **kw), lambda p: pd.read_hdf(p, "t"),
                    os.path.join(workdir, "table.h5"), repeats, workdir, df)
    try:
        import pyarrow  # noqa: F401  (not in Debian 12: skipped when absent)
        out["parquet"] = timed(lambda d, p: d.to_parquet(p), pd.read_parquet, os.path.join(workdir, "table.parquet"),
                               repeats, workdir, df)
    except ImportError:
        pass
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
