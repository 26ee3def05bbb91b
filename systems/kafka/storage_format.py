"""A KRaft node's storage formatted from what Kafka's StorageTool wrote once.

Why: `kafka.tools.StorageTool format` is a JVM start per node (0.6-0.75 CPU-s with the
class-data archive, 0.5-2 s of wall; a test suite formats some hundred nodes). What it
writes into an empty, single data directory is two files:

- `bootstrap.checkpoint`: the cluster's initial feature levels (metadata.version from the
  release, then the `--feature` levels). It depends on the Kafka version, the features
  and `unstable.feature.versions.enable`, not on the cluster id or the node: two formats
  of different clusters and nodes differ only in the snapshot's timestamp and its CRC
  (measured on 4.1.1).
- `meta.properties`: version, cluster.id, node.id and a new directory.id.

So StorageTool runs once per (version, features, unstable flag) into a template folder
beside the version's jars, and each node gets a copy of the template's
`bootstrap.checkpoint` and the template's `meta.properties` with its own cluster id, node
id and a new directory id (`new_directory_id`, as Kafka's Uuid.randomUuid). A template
whose folder holds anything else (a later Kafka's layout), or a node with several data
directories or its own metadata.log.dir, is formatted by StorageTool as before
(`template_for` returns None).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from systems.kafka import install, jvm
from systems.kafka.segments import parse_properties

META, CHECKPOINT = "meta.properties", "bootstrap.checkpoint"
TEMPLATE_FILES = {CHECKPOINT, META}
# Properties that change what StorageTool writes beyond the cluster id, node id and
# directory id (Formatter: the release version's choice), or where it writes.
FORMAT_KEYS = ("unstable.feature.versions.enable", "unstable.api.versions.enable")
PLACE_KEYS = ("metadata.log.dir",)


class FormatError(RuntimeError):
    """StorageTool failed: its last line."""


def new_directory_id() -> str:
    """A log directory's id: 16 random bytes, URL-safe base64 without padding, never
    starting with '-' (Kafka's Uuid.randomUuid; a version-4 UUID is never one of the
    reserved directory ids, whose high 64 bits are 0)."""
    return jvm.new_cluster_id()


def failure(out: subprocess.CompletedProcess) -> str:
    """StorageTool's failure in one line: its last line of output, else its exit code."""
    why = (out.stderr or out.stdout).strip().splitlines()
    return f"kafka.tools.StorageTool format failed: {why[-1] if why else out.returncode}"


def template_for(version: str, java: str, features: list[str], props_text: str) -> Path | None:
    """The template folder for a node whose server.properties is `props_text` (made now
    with StorageTool if missing, one process at a time), or None when this node must be
    formatted by StorageTool itself (several data directories, a metadata.log.dir, or a
    template that holds more than the two files)."""
    props = parse_properties(props_text)
    if any(key in props for key in PLACE_KEYS) or "," in props.get("log.dirs", props.get("log.dir", "")):
        return None
    ident = "\n".join([version, *features, *(f"{k}={props.get(k, '')}" for k in FORMAT_KEYS)])
    root = install.lib_dir(version).parent / "storage-format"
    folder = root / hashlib.sha1(ident.encode()).hexdigest()[:12]
    if not folder.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        with open(root / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not folder.is_dir():
                _make_template(version, java, features, props_text, folder)
    names = {p.name for p in folder.iterdir()}
    return folder if names == TEMPLATE_FILES else None


def _make_template(version: str, java: str, features: list[str], props_text: str, folder: Path) -> None:
    """StorageTool format of an empty folder with the node's own properties (its data
    directory pointed at the folder), renamed into place when complete."""
    with tempfile.TemporaryDirectory(prefix=".making-", dir=folder.parent) as tmp:
        data = Path(tmp) / "data"
        lines = [line for line in props_text.splitlines()
                 if not line.strip().startswith(("log.dirs=", "log.dir="))]
        props = Path(tmp) / "server.properties"
        props.write_text("\n".join([*lines, f"log.dirs={data}", ""]))
        argv = [java, "-Xms128m", "-Xmx128m", *jvm.JVM_FLAGS, *jvm.archive_flags(version, java),
                "-cp", os.path.join(str(install.lib_dir(version)), "*"), "kafka.tools.StorageTool", "format",
                "-t", jvm.new_cluster_id(), "-c", str(props), *features]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise FormatError(failure(out))
        os.rename(data, folder)


def meta_properties(template: Path, cluster_id: str, node_id: int) -> str:
    """The template's meta.properties with this node's cluster id, node id and a new
    directory id (every other line, e.g. `version=1`, as StorageTool wrote it)."""
    values = {"cluster.id": cluster_id, "node.id": str(node_id), "directory.id": new_directory_id()}
    lines = []
    for line in (template / META).read_text().splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line and not line.startswith("#") else None
        lines.append(f"{key}={values.pop(key)}" if key in values else line)
    if values:   # a layout this module does not know: the caller formats with StorageTool
        raise FormatError(f"{template / META} has no {', '.join(sorted(values))}")
    return "\n".join(lines) + "\n"


def fill(template: Path, data_dir: str, cluster_id: str, node_id: int, put) -> bool:
    """Write the template's files into the empty `data_dir` through `put(local, remote)`;
    False (nothing written) when it is already formatted (StorageTool's --ignore-formatted)."""
    if os.path.exists(os.path.join(data_dir, META)):
        return False
    put(str(template / CHECKPOINT), os.path.join(data_dir, CHECKPOINT))
    with tempfile.TemporaryDirectory(prefix="kafka-format-") as tmp:
        meta = Path(tmp) / META
        meta.write_text(meta_properties(template, cluster_id, node_id))
        put(str(meta), os.path.join(data_dir, META))   # last: its presence means formatted
    return True
