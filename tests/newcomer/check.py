"""Loads the newcomer cases in Python, with python/amphora_reader.py alone,
and compares every value with what the C++ programs saved.

    /usr/bin/python3 check.py STORE READER_DIR
"""

import os
import sys

import numpy as np


def main():
    store, reader_dir = sys.argv[1], sys.argv[2]
    sys.path.insert(0, reader_dir)
    import amphora_reader as reader

    bundle = reader.load(store, "menpo", verify=True)
    assert list(bundle) == ["model", "images", "initial_weights"], list(bundle)
    model = bundle["model"]
    assert list(model) == ["name", "config", "weights"], list(model)
    assert model["name"] == "aam"
    assert model["config"] == {"optimizer": "adam", "scales": "0.5,1.0"}, model["config"]
    want_w = ((np.arange(256 * 256) % 1000 - 500) / 8.0).astype(np.float32).reshape(256, 256)
    assert model["weights"].dtype == np.float32 and np.array_equal(model["weights"], want_w)
    # One artifact, loaded once: the same array at both places.
    assert bundle["initial_weights"] is model["weights"]
    images = bundle["images"]
    assert len(images) == 50
    for k, image in enumerate(images):
        assert list(image) == ["pixels", "landmarks"], list(image)
        px = ((k * 37 + np.arange(128 * 128) * 11) % 256).astype(np.uint8).reshape(128, 128)
        assert image["pixels"].dtype == np.uint8 and np.array_equal(image["pixels"], px), k
        j = np.arange(68, dtype=np.float32)
        lm = np.stack([k + 0.5 * j, 2.0 * k - 0.25 * j], axis=1).astype(np.float32)
        assert image["landmarks"].dtype == np.float32 and image["landmarks"].shape == (68, 2), k
        assert np.array_equal(image["landmarks"], lm), k

    records = reader.load(store, "detections", verify=True)
    assert len(records) == 200
    for i, r in enumerate(records):
        assert list(r) == ["filepath", "image_id", "width", "height", "bboxes", "labels", "iscrowd"], list(r)
        assert r["filepath"] == f"images/{i:05d}.jpg" and r["image_id"] == 1000 + i
        assert r["width"] == 640 - i % 7 and r["height"] == 480 + i % 5
        boxes = np.array([[i, j, i + 10.5, j + 20.25] for j in range(i % 4)], np.float32).reshape(-1, 4)
        assert r["bboxes"].dtype == np.float32 and np.array_equal(r["bboxes"], boxes), i
        assert r["labels"] == [f"cls{(i + j) % 3}" for j in range(i % 4)], i
        assert r["iscrowd"] == [(i + j) % 2 == 0 for j in range(i % 4)], i
    print(f"python loads both: {len(images)} images, {len(records)} detection records")


if __name__ == "__main__":
    main()
