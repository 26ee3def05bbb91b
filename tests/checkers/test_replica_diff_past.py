"""Past copies in the replica diff: a node's replica as it was before a restart
(nodes/<node>/past/<n>.json) shows committed records that were later overwritten
(`overwritten`), and nothing else, in both engines; the Spark engine's examples also
say what a divergence differs in as the local engine's do."""

import json

import pytest

from checkers.linearizability import same_verdicts
from checkers.check_store import check_campaign, check_store
from tests.checkers import log_dumps, log_histories
from tests.checkers.test_store import make_store


def _with_past(root, past: dict[str, list[dict]]):
    """Write each node's past copies as the runner's collect step does."""
    for node, copies in past.items():
        for n, copy in enumerate(copies, 1):
            path = root / "nodes" / node / "past"
            path.mkdir(parents=True, exist_ok=True)
            (path / f"{n}.json").write_text(json.dumps(copy))
    return root


def overwritten(root):
    """n1 held value 555 at key 0's committed offset 2 before its restart; every final
    replica holds 102 there (n1 truncated and refetched from an unclean leader)."""
    copy = log_dumps.dump(1, {0: (3, 0, [(0, 0, 100), (1, 0, 101), (2, 0, 555)])})
    store = make_store(root, log_histories.clean().ops, log_dumps.agreeing())
    return _with_past(store, {"n1": [copy]})


def uncommitted_tail(root):
    """n3's past copy differs only above its own HW: a tail that may be truncated."""
    copy = log_dumps.dump(3, {0: (2, 0, [(0, 0, 100), (1, 0, 101), (2, 1, 999)])})
    store = make_store(root, log_histories.clean().ops, log_dumps.agreeing())
    return _with_past(store, {"n3": [copy]})


def only_in_the_past(root):
    """Acknowledged 103 and 104 at offsets 3 and 4 are held by a past copy only (HW 5):
    still lost, and the final committed range does not grow to the past HW."""
    copy = log_dumps.dump(1, {0: (5, 0, [(0, 0, 100), (1, 0, 101), (2, 0, 102), (3, 0, 103), (4, 0, 104)])})
    store = make_store(root, log_histories.lost_write().ops, log_dumps.agreeing())
    return _with_past(store, {"n1": [copy, copy]})


def epoch_only(root):
    """No past copy: the final replicas keep one record in two leader epochs (the Spark
    engine's divergence examples must say `differs_in` as the local one does)."""
    return make_store(root, log_histories.clean().ops, log_dumps.epoch_only())


CASES = {"overwritten": overwritten, "uncommitted-tail": uncommitted_tail, "only-in-the-past": only_in_the_past,
         "epoch-only": epoch_only}


@pytest.mark.unit
def test_a_committed_record_a_past_copy_held_and_the_final_replicas_replaced_is_overwritten(tmp_path):
    diff = check_store(str(overwritten(tmp_path / "s")))["checkers"]["replica-diff"]
    assert diff["valid"] is False and diff["counts"]["overwritten"] == 1
    assert diff["counts"]["divergence"] == 0  # the final replicas agree
    [example] = diff["examples"]["overwritten"]
    assert (example["key"], example["offset"]) == (0, 2)
    assert ["n1@past1", 0, 555] in example["replicas"] and ["n1", 0, 102] in example["replicas"]
    assert diff["counts"]["missing-committed"] == diff["counts"]["lost-acknowledged"] == 0


@pytest.mark.unit
def test_a_past_copys_tail_above_its_hw_is_not_overwritten(tmp_path):
    diff = check_store(str(uncommitted_tail(tmp_path / "s")))["checkers"]["replica-diff"]
    assert diff["valid"] is True, diff


@pytest.mark.unit
def test_what_only_a_past_copy_holds_is_still_lost_and_not_missing(tmp_path):
    with_past = check_store(str(only_in_the_past(tmp_path / "s")))["checkers"]["replica-diff"]
    without = check_store(str(make_store(tmp_path / "t", log_histories.lost_write().ops,
                                         log_dumps.agreeing())))["checkers"]["replica-diff"]
    assert with_past["counts"] == without["counts"]
    # lost_write(): 103 acknowledged at 3 and in no dump (104 at 4 is an indefinite send)
    assert with_past["counts"]["lost-acknowledged"] == 1 and with_past["counts"]["missing-committed"] == 0


@pytest.mark.spark
def test_spark_treats_past_copies_as_the_local_engine_does(spark, tmp_path):
    stores = {name: str(make(tmp_path / name)) for name, make in CASES.items()}
    remote = check_campaign(list(stores.values()))
    for name, store in stores.items():
        local = check_store(store)
        assert same_verdicts(remote[store]["checkers"]) == same_verdicts(local["checkers"]), name
    assert remote[stores["overwritten"]]["checkers"]["replica-diff"]["counts"]["overwritten"] == 1
    [example] = remote[stores["epoch-only"]]["checkers"]["replica-diff"]["examples"]["divergence"]
    assert example["differs_in"] == "epoch"
