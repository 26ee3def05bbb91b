"""The sans-IO replication core (h11 is the model): pure state machines for a
broker (``BrokerCore``) and the controller (``ControllerCore``). Inputs are method
calls carrying the current time in ms; outputs are the action objects of
``replica.core.actions``. The asyncio shells and the simulator drive the same code."""

from .actions import (CONTROLLER, REMOTE_STORE, Append, DeleteSegments, Flush, Log, Persist, Reply,
                      ResetLog, Roll, Send, SetTimer, Truncate, WriteEpochCheckpoint, WriteOffsetCheckpoint)
from .broker import BrokerCore
from .controller import ControllerCore
from .epoch_cache import EpochCache

__all__ = ["BrokerCore", "ControllerCore", "EpochCache", "CONTROLLER", "REMOTE_STORE", "Append",
           "DeleteSegments", "Flush", "Log", "Persist", "Reply", "ResetLog", "Roll", "Send", "SetTimer",
           "Truncate", "WriteEpochCheckpoint", "WriteOffsetCheckpoint"]
