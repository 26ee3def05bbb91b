"""Where the suite's own test vectors live (tests/data, see its README)."""
from pathlib import Path

TESTDATA = Path(__file__).resolve().parents[1] / "data"
KNOSSOS = TESTDATA / "knossos"
