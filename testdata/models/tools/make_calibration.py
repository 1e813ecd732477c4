#!/usr/bin/python3
"""Writes testdata/corpora/<domain>.calib.txt: the first 48,000 characters of each domain's
training split (the paragraphs train_tiny_models.py trains on, never the held-out ones), as
calibration text for `optkit compress` tests. Reads the same Debian package files."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_tiny_models as t  # noqa: E402

CALIB_BYTES = 48_000

for domain, read_docs in t.DOMAINS.items():
    train, _ = t.split_domain(read_docs(), 10**9)
    with open(os.path.join(t.CORPORA, f"{domain}.calib.txt"), "w") as f:
        f.write(train[:CALIB_BYTES])
    print(domain, len(train[:CALIB_BYTES]))
