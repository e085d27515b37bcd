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
import time

from pickle_peer import dump, load, time_dumps, time_loads
from scratch import retire, touch_scratch


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
    save_s, load_s = [], []
    for _ in range(repeats):
        retire(path, workdir)
        touch_scratch()
        t = time.perf_counter()
        with open(path, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False))
                f.write("\n")
        save_s.append(time.perf_counter() - t)
    for _ in range(repeats):
        touch_scratch()
        t = time.perf_counter()
        with open(path, encoding="utf-8") as f:
            back = [json.loads(line) for line in f]
        checks = one_pass(back)
        load_s.append(time.perf_counter() - t)
        del back
    out.update({"jsonl_save_s": save_s, "jsonl_load_s": load_s, "jsonl_bytes": os.path.getsize(path), **checks})
    retire(path, workdir)

    pkl = os.path.join(workdir, "peer-records.pkl")
    out["pickle_save_s"] = time_dumps(records, pkl, repeats, workdir)
    del records
    timings, _ = time_loads(pkl, repeats, one_pass)
    out.update({"pickle_load_s": timings["load_s"], "pickle_load_nogc_s": timings["load_nogc_s"],
                "pickle_bytes": timings["bytes"]})
    retire(pkl, workdir)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
