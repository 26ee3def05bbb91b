"""The sans-IO replication core (h11 is the model): pure state machines for a
broker (``BrokerCore``) and the controller (``ControllerCore``). Inputs are method
calls carrying the current time in ms; outputs are the action objects of
``replica.core.actions``. The asyncio shells and the simulator drive the same code."""

from .actions import (CONTROLLER, Append, Flush, Log, Persist, Reply, Send, SetTimer, Truncate,
                      WriteEpochCheckpoint, WriteOffsetCheckpoint)
from .broker import BrokerCore
from .controller import ControllerCore
from .epoch_cache import EpochCache

__all__ = ["BrokerCore", "ControllerCore", "EpochCache", "CONTROLLER", "Append", "Flush", "Log",
           "Persist", "Reply", "Send", "SetTimer", "Truncate", "WriteEpochCheckpoint",
           "WriteOffsetCheckpoint"]
