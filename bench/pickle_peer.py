#!/usr/bin/python3
"""The pickle side of the Amphora benchmark: the same values, pickled with
protocol 5 (numpy arrays for tensors) to a file and loaded back.

usage:
  pickle_peer.py composite REPEATS WORKDIR INPUT_DIR
      INPUT_DIR holds config.json, images.npy (N x 64 x 64 x 3) and
      weights/NAME.npy, written by amphora_bench.
  pickle_peer.py bundle REPEATS WORKDIR INPUT_DIR
      INPUT_DIR holds weights.npy, pixels.npy (N x 128 x 128) and
      landmarks.npy (N x 68 x 2), written by amphora_bench.
  pickle_peer.py records REPEATS WORKDIR RECORDS.json
  pickle_peer.py tiny REPEATS WORKDIR COUNT

Each prints one JSON object: lists of seconds per repeat ("save_s", ...),
file sizes and checksums the C++ side compares with its own.
"""
import gc
import json
import os
import pickle
import sys
import time

import numpy as np

from scratch import retire, time_saves, touch_scratch


def dump(value, path):
    with open(path, "wb") as f:
        pickle.dump(value, f, protocol=5)


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def time_dumps(value, path, repeats, workdir):
    """Seconds to pickle `value` to `path`, per repeat; the file is kept."""
    return time_saves(lambda p: dump(value, p), path, repeats, workdir)


def time_loads(path, repeats, touch):
    """Seconds to load `path` and run `touch` over the result, per repeat,
    with Python's cyclic garbage collector on (the default) and off; the file
    size; touch's last result. Call it with the original value gone, so that
    the collector walks only through what pickle.load builds."""
    gc.collect()
    times = {True: [], False: []}
    result = None
    for _ in range(repeats):
        for collector in (True, False):
            if not collector:
                gc.disable()
            touch_scratch()
            t = time.perf_counter()
            back = load(path)
            result = touch(back)
            times[collector].append(time.perf_counter() - t)
            gc.enable()
            back = None
            gc.collect()
    return {"load_s": times[True], "load_nogc_s": times[False], "bytes": os.path.getsize(path)}, result


# The same pass the C++ side makes over what it loaded: sum every tensor and
# every image, so neither side gets lazily mapped pages for free.
def sum_weights(weights):
    return sum(float(w.sum()) for w in weights.values())


def sum_images(images):
    return sum(int(img.sum()) for img in images)


def whole_pass(back):
    entry = back["train"]
    return sum_weights(entry["model"]["weights"]), sum_images(entry["images"]), len(entry["model"]["config"])


def composite(repeats, workdir, inputs):
    with open(os.path.join(inputs, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    weights = {}
    for name in sorted(os.listdir(os.path.join(inputs, "weights"))):
        weights[name[: -len(".npy")]] = np.load(os.path.join(inputs, "weights", name))
    stacked = np.load(os.path.join(inputs, "images.npy"))
    images = [stacked[i].copy() for i in range(stacked.shape[0])]  # one array per image
    del stacked
    value = {"train": {"model": {"config": config, "weights": weights}, "images": images}}
    counts = {"tensors": len(weights), "images": len(images)}

    values = {"config": config, "weights": weights, "images": images, "whole": value}
    passes = {"config": len, "weights": sum_weights, "images": sum_images, "whole": whole_pass}
    files = {key: os.path.join(workdir, "composite-%s.pkl" % key) for key in values}
    saves = {key: time_dumps(values[key], files[key], repeats, workdir) for key in values}
    del value, values, config, weights, images
    parts = {}
    for key in saves:
        parts[key], result = time_loads(files[key], repeats, passes[key])
        parts[key]["save_s"] = saves[key]
        retire(files[key], workdir)
    tensor_sum, image_sum, config_keys = result
    print(json.dumps({"section": "composite", "parts": parts, "config_keys": config_keys, "tensor_sum": tensor_sum,
                      "image_sum": image_sum, **counts}), flush=True)


def bundle(repeats, workdir, inputs):
    """Menpo's bundle as a Python user holds it: one weights array referenced
    twice (pickle stores it once), a list of image dicts."""
    weights = np.load(os.path.join(inputs, "weights.npy"))
    pixels = np.load(os.path.join(inputs, "pixels.npy"))
    landmarks = np.load(os.path.join(inputs, "landmarks.npy"))
    value = {"model": {"name": "aam", "config": {"optimizer": "adam", "scales": "0.5,1.0", "landmarks": "68",
                                                 "patch_shape": "17x17"}, "weights": weights},
             "images": [{"pixels": pixels[i].copy(), "landmarks": landmarks[i].copy()} for i in range(len(pixels))],
             "initial_weights": weights}
    del pixels, landmarks, weights
    out = os.path.join(workdir, "bundle.pkl")
    save_s = time_dumps(value, out, repeats, workdir)
    del value

    def touch(back):
        return (float(back["model"]["weights"].sum()) + float(back["initial_weights"].sum()),
                sum(int(im["pixels"].sum()) for im in back["images"]),
                sum(float(im["landmarks"].astype(np.float64).sum()) for im in back["images"]), len(back["images"]))

    result, (weight_sum, pixel_sum, landmark_sum, images) = time_loads(out, repeats, touch)
    result["save_s"] = save_s
    retire(out, workdir)
    print(json.dumps({"section": "bundle", **result, "weight_sum": weight_sum, "pixel_sum": pixel_sum,
                      "landmark_sum": landmark_sum, "images": images}), flush=True)


def records(repeats, workdir, source):
    with open(source, encoding="utf-8") as f:
        value = json.load(f)
    # Labels come from a small vocabulary: one string object per label, as a
    # program that looks them up in its class list would have.
    for r in value:
        r["labels"] = [sys.intern(label) for label in r["labels"]]
    out = os.path.join(workdir, "records.pkl")
    save_s = time_dumps(value, out, repeats, workdir)
    del value
    result, _ = time_loads(out, repeats, len)
    result["save_s"] = save_s
    back = load(out)  # counted outside the timed loads
    counts = {"count": len(back), "box_values": sum(len(r["boxes"]) for r in back),
              "labels": sum(len(r["labels"]) for r in back)}
    retire(out, workdir)
    print(json.dumps({"section": "records", **result, **counts}), flush=True)


def tiny(repeats, workdir, count):
    root = os.path.join(workdir, "tiny-pickles")
    int_save, int_load, str_save, str_load = [], [], [], []
    for _ in range(repeats):
        retire(root, workdir)
        os.makedirs(root)
        touch_scratch()
        t = time.perf_counter()
        for i in range(count):
            dump(1000 + i, os.path.join(root, "tiny-%04d.pkl" % i))
        int_save.append(time.perf_counter() - t)
        touch_scratch()
        t = time.perf_counter()
        for i in range(count):
            dump("note %04d: checkpoint written" % i, os.path.join(root, "note-%d.pkl" % (i + 1)))
        str_save.append(time.perf_counter() - t)
        touch_scratch()
        t = time.perf_counter()
        total = 0
        for i in range(count):
            total += load(os.path.join(root, "tiny-%04d.pkl" % i))
        int_load.append(time.perf_counter() - t)
        touch_scratch()
        t = time.perf_counter()
        chars = 0
        for i in range(count):
            chars += len(load(os.path.join(root, "note-%d.pkl" % (i + 1))))
        str_load.append(time.perf_counter() - t)
    retire(root, workdir)
    print(json.dumps({"section": "tiny", "count": count, "int_save_s": int_save, "int_load_s": int_load,
                      "str_save_s": str_save, "str_load_s": str_load, "int_total": total, "chars": chars}),
          flush=True)


def main():
    mode, repeats, workdir, arg = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if mode == "composite":
        composite(repeats, workdir, arg)
    elif mode == "bundle":
        bundle(repeats, workdir, arg)
    elif mode == "records":
        records(repeats, workdir, arg)
    elif mode == "tiny":
        tiny(repeats, workdir, int(arg))
    else:
        sys.exit("pickle_peer.py: unknown mode " + mode)


if __name__ == "__main__":
    main()
