"""Sequential specifications for the linearizability search.

A model turns a history op into per-key sub-ops (``split``: this is where
P-compositionality comes from) and steps a hashable state through them
(``step`` returns ``INCONSISTENT`` when the op cannot happen in that state).
States must be hashable because the search caches (linearized set, state).

Models (name[:initial value as EDN]):

- ``register``      read / write; one key.  A read of nil matches any value.
- ``cas-register``  read / write / cas [old new]; one key (Knossos's model).
- ``kv``            read / write / cas on ``[key value]`` tuples (Jepsen's
  independent keys); a cas-register per key.
- ``multi-register`` ``:txn`` ops, a list of ``[read|write key value]``
  applied atomically; one key (a txn may span registers). Default initial {}.
- ``mutex``         acquire / release of one lock.
- ``log``           the harness's Kafka-style history, one log per key
  (partition).  ``send`` [key value] is an append; its ``ok`` value
  [key [offset value]] says at which offset it landed, and the append must
  land exactly at the end of the log (offset = current length).  A ``send``
  that ends in ``info`` (or never completes) may append at any offset, once,
  or never; a ``fail`` never happened.  A ``poll`` that returns
  {key [[offset value] ...]} is split per key into reads; each read asserts
  that, at one instant, every returned offset holds the returned value (so
  the log is at least that long).  Polls that returned nothing constrain
  nothing.  A poll spanning several keys is not required to be atomic across
  keys (Kafka gives no such guarantee), which is what makes splitting by key
  sound.  A fetch returns the log from its position on, so one read may skip
  only offsets nobody observed (as Jepsen ranks offsets: compaction or
  transaction markers leave such holes); a read that jumps over an offset some
  send was acknowledged at or some read returned can never take effect
  (``prepare`` turns it into ``skip``).  An ``end`` sub-op (the
  store checker's: the final consumer's last, empty poll of a key, see
  ``checkers.linearizability``) asserts that at one instant the log's length
  is exactly its value.  The log starts empty at offset 0.
"""
from __future__ import annotations

import bisect
from typing import Any, Hashable

INCONSISTENT = object()
"""Returned by ``step`` when the op cannot take effect in the given state."""

SINGLE_KEY = None
"""The key of models that are not partitioned."""


def freeze(value: Any) -> Hashable:
    """Make a value hashable (lists become tuples, dicts sorted item tuples)."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((freeze(k), freeze(v)) for k, v in value.items()))
    return value


class Model:
    """Base: one sequential object per key."""

    name = "model"

    def __init__(self, initial: Any = None):
        self.initial_value = initial

    def initial(self) -> Hashable:
        return freeze(self.initial_value)

    def split(self, f: str, value: Any, definite: bool) -> list[tuple[Any, str, Any]]:
        """Sub-ops ``(key, f, value)`` of one op; drop those that constrain nothing.

        ``definite`` is false for ops that ended in ``info`` or never
        completed: their value is the invocation's (a read's result unknown).
        """
        raise NotImplementedError

    def step(self, state: Hashable, f: str, value: Any) -> Hashable:
        raise NotImplementedError

    def describe(self, state: Hashable) -> Any:
        """A JSON-able view of a state, for counterexamples."""
        return state

    def prepare(self, calls: list) -> list:
        """Sound per-key pruning before the search (default: none)."""
        return calls

    def fresh(self) -> "Model":
        """A model with the same spec and no per-search memo (one per key)."""
        return type(self)(self.initial_value)


class CASRegister(Model):
    name = "cas-register"
    ops = ("read", "write", "cas")

    def split(self, f, value, definite):
        if f not in self.ops:
            raise ValueError(f"{self.name}: unknown op f={f!r}; expected one of {', '.join(self.ops)}")
        if f == "read" and value is None:
            return []
        if f == "cas":
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise ValueError(f"{self.name}: cas value must be [old new]; got {value!r}")
            value = (freeze(value[0]), freeze(value[1]))
        return [(SINGLE_KEY, f, freeze(value))]

    def step(self, state, f, value):
        if f == "read":
            return state if value == state else INCONSISTENT
        if f == "write":
            return value
        old, new = value
        return new if old == state else INCONSISTENT


class Register(CASRegister):
    name = "register"
    ops = ("read", "write")


class KV(CASRegister):
    """Independent cas-registers, one per key: values are ``[key value]``."""

    name = "kv"

    def split(self, f, value, definite):
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError(f"kv: op value must be [key value]; got {value!r}")
        key, inner = value
        return [(freeze(key), sub_f, sub_v) for _, sub_f, sub_v in super().split(f, inner, definite)]


class MultiRegister(Model):
    """Registers updated by atomic transactions; state = sorted (key, value) pairs."""

    name = "multi-register"

    def __init__(self, initial: Any = None):
        super().__init__(initial if initial is not None else {})

    def split(self, f, value, definite):
        if f != "txn" or not isinstance(value, (list, tuple)):
            raise ValueError(f"multi-register: expected :txn ops with a list of [f key value]; got f={f!r}")
        micro = []
        for item in value:
            if not isinstance(item, (list, tuple)) or len(item) != 3 or item[0] not in ("read", "write"):
                raise ValueError(f"multi-register: expected [read|write key value]; got {item!r}")
            mf, key, v = item
            if mf == "read" and v is None:
                continue
            micro.append((mf, freeze(key), freeze(v)))
        return [(SINGLE_KEY, "txn", tuple(micro))] if micro else []

    def step(self, state, f, value):
        current = dict(state)
        for mf, key, v in value:
            if mf == "read":
                if current.get(key) != v:
                    return INCONSISTENT
            else:
                current[key] = v
        return tuple(sorted(current.items()))

    def describe(self, state):
        return {str(k): v for k, v in state}


class Mutex(Model):
    """One lock: acquire when free, release when held. State = held?"""

    name = "mutex"

    def initial(self):
        return bool(self.initial_value)

    def split(self, f, value, definite):
        if f not in ("acquire", "release"):
            raise ValueError(f"mutex: unknown op f={f!r}; expected acquire or release")
        return [(SINGLE_KEY, f, None)]

    def step(self, state, f, value):
        if f == "acquire":
            return INCONSISTENT if state else True
        return False if state else INCONSISTENT


def _skips(records: tuple, observed: list[int]) -> bool:
    """Whether a read (records by offset, highest first) jumps over an observed offset."""
    for (high, _), (low, _) in zip(records, records[1:]):
        if high - low > 1:
            i = bisect.bisect_right(observed, low)
            if i < len(observed) and observed[i] < high:
                return True
    return False


def _int_key(key: Any) -> Any:
    """Poll values from JSON have string keys; sends have int keys."""
    if isinstance(key, str) and key.lstrip("-").isdigit():
        return int(key)
    return key


class Log(Model):
    """Append-only log per key; states are interned ids of log prefixes.

    Interning keeps states O(1) to hash and compare: state 0 is the empty
    log, and each (parent, value) pair gets one id.
    """

    name = "log"

    def __init__(self, initial: Any = None):
        super().__init__(None)
        self._parent = [-1]
        self._value: list[Any] = [None]
        self._length = [0]
        self._child: dict[tuple[int, Any], int] = {}

    def initial(self):
        return 0

    def split(self, f, value, definite):
        if f == "send":
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise ValueError(f"log: a send value must be [key value]; got {value!r}")
            key, inner = value
            if definite and isinstance(inner, (list, tuple)) and len(inner) == 2:
                return [(key, "append", (inner[0], freeze(inner[1])))]
            return [(key, "append", (None, freeze(inner)))]  # offset unknown
        if f == "poll":
            if not definite or not value:
                return []
            return [
                (_int_key(key), "read", tuple(sorted(((o, freeze(v)) for o, v in records), reverse=True)))
                for key, records in value.items()
                if records
            ]
        return []  # other client ops (e.g. assign/subscribe) do not touch the log

    def step(self, state, f, value):
        if f == "append":
            offset, v = value
            if offset is not None and offset != self._length[state]:
                return INCONSISTENT
            node = self._child.get((state, v))
            if node is None:
                node = len(self._parent)
                self._parent.append(state)
                self._value.append(v)
                self._length.append(self._length[state] + 1)
                self._child[(state, v)] = node
            return node
        if f == "place":  # an indefinite append, allowed only at some offsets
            if self._length[state] not in value[1]:
                return INCONSISTENT
            return self.step(state, "append", (None, value[0]))
        if f == "end":
            return state if self._length[state] == value else INCONSISTENT
        if f == "skip":  # a read that jumped over an observed offset: never possible
            return INCONSISTENT
        # read: records sorted by offset, highest first; walk back from the end
        node = state
        parent, values, length = self._parent, self._value, self._length
        for offset, v in value:
            if offset >= length[node] or offset < 0:
                return INCONSISTENT
            while length[node] - 1 > offset:
                node = parent[node]
            if values[node] != v:
                return INCONSISTENT
        return state

    def prepare(self, calls):
        """Pin indefinite sends to the offsets where they could be.

        Offsets are pinned by acknowledged sends and by reads.  An indefinite
        send of v can only sit at an offset pinned to v alone, or at a gap
        (an unpinned offset below the highest pinned one, or below the length an
        ``end`` asserts); if v was read and
        only this send carries v, only where v was read.  Landing past every
        pinned offset would change nothing any other op can see, so that
        choice is dropped (it is the same as never taking effect).  A send
        with no possible offset is dropped.  This keeps crashed sends from
        multiplying the search by every place they could be appended.
        """
        pinned: dict[int, set] = {}
        senders: dict[Any, int] = {}
        for call in calls:
            if call.f == "append":
                offset, v = call.value
                senders[v] = senders.get(v, 0) + 1
                if offset is not None:
                    pinned.setdefault(offset, set()).add(v)
            elif call.f == "read":
                for offset, v in call.value:
                    pinned.setdefault(offset, set()).add(v)
        top = max(pinned, default=-1)
        observed = sorted(pinned)
        for call in calls:
            if call.f == "end":
                top = max(top, call.value - 1)
        seen_at: dict[Any, set] = {}
        for offset, vs in pinned.items():
            for v in vs:
                seen_at.setdefault(v, set()).add(offset)
        gaps = None  # unpinned offsets up to top: computed once, when an indefinite send needs them
        out = []
        for call in calls:
            if call.f == "append" and call.value[0] is None:
                v = call.value[1]
                if gaps is None:
                    gaps = frozenset(range(top + 1)).difference(pinned)
                # where v alone is pinned, or a gap (same set as testing every offset up to top)
                allowed = gaps | {o for o in seen_at.get(v, ()) if o <= top and pinned[o] == {v}}
                if senders[v] == 1 and v in seen_at:
                    allowed &= seen_at[v]
                if not allowed:
                    continue
                call = call._replace(f="place", value=(v, frozenset(allowed)))
            elif call.f == "read" and _skips(call.value, observed):
                call = call._replace(f="skip")
            out.append(call)
        return out

    def describe(self, state):
        out = []
        while state > 0:
            out.append(self._value[state])
            state = self._parent[state]
        out.reverse()
        return out


MODELS: dict[str, type[Model]] = {
    m.name: m for m in (Register, CASRegister, KV, MultiRegister, Mutex, Log)
}


def parse_model(spec: str | Model) -> Model:
    """``name`` or ``name:INITIAL`` (INITIAL in EDN, e.g. ``cas-register:0``,
    ``multi-register:{:x 0 :y 0}``) -> a model instance."""
    if isinstance(spec, Model):
        return spec
    name, _, initial_text = spec.partition(":")
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {', '.join(sorted(MODELS))}")
    initial = None
    if initial_text.lstrip("-").isdecimal() and initial_text.isascii():
        # the common case (cas-register:0) without edn_format, whose parser tables
        # take 40 ms to load: a third of `harness check-history` on a small history
        initial = int(initial_text)
    elif initial_text:
        import edn_format

        from history.formats import _plain

        try:
            initial = _plain(edn_format.loads(initial_text))
        except Exception as err:  # edn_format raises several types
            raise ValueError(f"model {spec!r}: the initial value must be EDN, e.g. {name}:0 ({err})") from None
    return MODELS[name](initial)
