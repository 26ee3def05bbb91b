"""Corrupt files on a host: run there as `python3 -c SOURCE JSON` (standard
library only, so a bare host needs nothing but python3). Prints one JSON
line: what was changed, so the history says exactly which bits and bytes.

JSON: {"globs": [...], "match": "*.log" | null, "mode": "bitflip" | "truncate",
       "bits": N | null, "probability": p | null, "bytes": N | null, "seed": S}
- bitflip: `bits` random bits over all matched bytes (weighted by file
  size), or each bit with `probability` (the count drawn binomially);
- truncate: drop the last `bytes` bytes of one random matched file, or
  (bytes null) cut it to a random length below its size.
"""
import fnmatch
import glob
import json
import os
import random
import sys


def main(arg: dict) -> dict:
    rng = random.Random(arg.get("seed"))
    files = sorted({p for g in arg["globs"] for p in glob.glob(g) if os.path.isfile(p)})
    if arg.get("match"):
        files = [p for p in files if fnmatch.fnmatch(os.path.basename(p), arg["match"])]
    files = [p for p in files if os.path.getsize(p) > 0]
    if not files:
        return {"files": 0, "changes": []}
    changes = []
    if arg["mode"] == "truncate":
        path = rng.choice(files)
        size = os.path.getsize(path)
        n = arg.get("bytes")
        to = max(0, size - int(n)) if n is not None else rng.randrange(0, size)
        os.truncate(path, to)
        changes.append({"file": path, "size": size, "to": to})
    else:
        sizes = [os.path.getsize(p) for p in files]
        total_bits = 8 * sum(sizes)
        if arg.get("probability") is not None:
            p = float(arg["probability"])
            count = sum(1 for _ in range(min(total_bits, 1_000_000)) if rng.random() < p) \
                if total_bits <= 1_000_000 else int(rng.gauss(total_bits * p, (total_bits * p * (1 - p)) ** 0.5))
        else:
            count = int(arg.get("bits") or 1)
        count = max(0, min(count, total_bits))
        for bit in sorted(rng.sample(range(total_bits), count)):
            byte, b = divmod(bit, 8)
            for path, size in zip(files, sizes):
                if byte < size:
                    break
                byte -= size
            with open(path, "r+b") as f:
                f.seek(byte)
                old = f.read(1)[0]
                f.seek(byte)
                f.write(bytes([old ^ (1 << b)]))
            changes.append({"file": path, "offset": byte, "bit": b})
    for path in {c["file"] for c in changes}:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return {"files": len(files), "changes": changes}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
