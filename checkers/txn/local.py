"""The in-process reduction of flat rows (history.flatten) to a `Graph`: the rows
as integer frames, then the same two steps as the Spark engine
(checkers.txn.keys over every key at once, then checkers.txn.assemble).

Written as pandas column operations (joins and group-bys in C): on a
100k-transaction synthetic history (bench/engines/txn_synthetic.write_tables)
the first such version took 1.0-1.1 CPU-s where the dict-per-row version it
replaced took 2.2-2.8 (same graph, same findings; on a shared, loaded
machine, 2026-11-28).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from history.flatten import READ_COLUMNS, SEND_COLUMNS, decode_value
from checkers.txn.assemble import assemble
from checkers.txn.graph import FAIL, INFO, OK, Graph
from checkers.txn.keys import key_facts


def reduce(sends: list[tuple], reads: list[tuple], ends: list[tuple]) -> Graph:
    """Flat send / read / end rows -> the Graph of their transactions."""
    S = pd.DataFrame.from_records(sends, columns=SEND_COLUMNS) if sends else pd.DataFrame(columns=SEND_COLUMNS)
    R = pd.DataFrame.from_records(reads, columns=READ_COLUMNS) if reads else pd.DataFrame(columns=READ_COLUMNS)
    texts = pd.concat([S["value"], R["value"]], ignore_index=True)
    vt, v, names = value_ids(texts)
    processes, _ = pd.factorize(pd.concat([S["process"], R["process"]], ignore_index=True).astype(str))
    n = len(S)
    S = pd.DataFrame({"key": S["key"].to_numpy(np.int64), "vt": vt[:n], "v": v[:n],
                      "offset": pd.to_numeric(S["offset"]).to_numpy(np.float64),
                      "t": np.select([S["type"].to_numpy() == "ok", S["type"].to_numpy() == "fail"], [OK, FAIL], INFO),
                      "p": processes[:n], "txn": S["invoke_index"].to_numpy(np.int64),
                      "complete": pd.to_numeric(S["complete_index"]).fillna(-1).to_numpy(np.int64)})
    R = pd.DataFrame({"key": R["key"].to_numpy(np.int64), "vt": vt[n:], "v": v[n:],
                      "offset": R["offset"].to_numpy(np.int64), "p": processes[n:],
                      "txn": R["invoke_index"].to_numpy(np.int64), "complete": R["index"].to_numpy(np.int64)})
    facts = key_facts(S, R, np.array(sorted({row[0] for row in ends}), dtype=np.int64))

    def decode(refs):
        return {ref: ref[2] if ref[1] == 0 else decode_value(names[ref[2]]) for ref in refs}

    return assemble(facts, decode)


def value_ids(texts: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vt, v, names) of value texts: a canonical integer text is (0, the integer), any
    other (1, its position in names), as checkers.txn.keys names values."""
    codes, names = pd.factorize(texts)
    names = np.asarray(names, dtype=object)
    vt_of = np.ones(len(names), dtype=np.int8)
    v_of = np.arange(len(names), dtype=np.int64)
    if len(names):
        canonical = pd.Series(names).str.fullmatch(r"0|-?[1-9][0-9]{0,17}").fillna(False).to_numpy(bool)
        v_of[canonical] = pd.Series(names[canonical]).astype(np.int64).to_numpy()
        vt_of[canonical] = 0
    return vt_of[codes], v_of[codes], names
