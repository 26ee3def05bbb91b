"""Both array kernels (`checkers.log_arrays`, `checkers.replica_arrays`) on the bench
generator's injected synthetic runs: the in-process kernels' results, and the same when
the keys are dealt round-robin to parts (as the Spark key pass deals them) and merged."""

import pytest

from bench.engines import synthetic
from checkers import log_anomalies, log_arrays, replica_arrays, replica_diff
from tests.checkers import arrays_cases

pytestmark = pytest.mark.unit

KERNELS = {  # name -> (array kernel, its tables, the in-process result of load_flat's rows)
    "log": (log_arrays, ("sends", "reads", "ends"),
            lambda sends, reads, records, replicas, ends: log_anomalies.check_flat(sends, reads, ends)),
    "replica-diff": (replica_arrays, ("records", "replicas", "sends"),
                     lambda sends, reads, records, replicas, ends: replica_diff.check_flat(records, replicas, sends)),
}


@pytest.mark.parametrize("seed", [3, 5, 8])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_injected_synthetic_runs(tmp_path, name, seed):
    arrays, names, kernel = KERNELS[name]
    run = arrays_cases.injected(tmp_path, seed)
    expected = kernel(*synthetic.load_flat(run))
    assert arrays.check_tables(*arrays_cases.read(run, names)) == expected
    assert all(expected["counts"].values())


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_keys_dealt_round_robin_merge_to_the_whole(tmp_path, name):
    arrays, names, _kernel = KERNELS[name]
    tables = arrays_cases.read(arrays_cases.injected(tmp_path, 3), names)
    whole = arrays.findings(*tables)
    assert arrays.merge([arrays.findings(*part) for part in arrays_cases.dealt(tables)]).result() == whole.result()
