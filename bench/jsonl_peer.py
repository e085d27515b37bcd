#!/usr/bin/python3
"""The Python side of the Amphora benchmark's jsonl section.

usage:
  jsonl_peer.py REPEATS WORKDIR RECORDS.jsonl

Loads the COCO-style records the C++ side wrote (one JSON object per line)
and times what a Python program does with them: json.dumps of every record
into a JSON lines file and json.loads of every line back, and pickle
protocol 5 of the list of dicts (pickle.load with the cyclic garbage
collector on and off). Each load is followed by one pass over every value
(the same sums the C++ side makes). Prints one JSON object.
"""
import json
import os
import sys

import pickle_peer
from scratch import retire, time_repeats, time_saves


def one_pass(records):
    boxes = labels = 0
    coords = areas = 0.0
    for r in records:
        for b in r["bboxes"]:
            coords += b[0] + b[1] + b[2] + b[3]
            boxes += 1
        labels += len(r["labels"])
        areas += sum(r["areas"])
    return {"count": len(records), "boxes": boxes, "labels": labels, "coord_sum": coords, "area_sum": areas}


def main():
    repeats, workdir, source = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with open(source, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    out = {"section": "jsonl"}

    path = os.path.join(workdir, "peer-records.jsonl")

    def write_lines(p):
        with open(p, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False))
                f.write("\n")

    def read_lines():
        with open(path, encoding="utf-8") as f:
            return one_pass([json.loads(line) for line in f])

    save_s = time_saves(write_lines, path, repeats, workdir)
    load_s, checks = time_repeats(read_lines, repeats)
    out.update({"jsonl_save_s": save_s, "jsonl_load_s": load_s, "jsonl_bytes": os.path.getsize(path), **checks})
    retire(path, workdir)

    pkl = os.path.join(workdir, "peer-records.pkl")
    out["pickle_save_s"] = pickle_peer.time_dumps(records, pkl, repeats, workdir)
    del records
    timings, _ = pickle_peer.time_loads(pkl, repeats, one_pass)
    out.update({"pickle_load_s": timings["load_s"], "pickle_load_nogc_s": timings["load_nogc_s"],
                "pickle_bytes": timings["bytes"]})
    retire(pkl, workdir)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
