"""Remote control of hosts: local (optionally inside a network namespace), SSH."""


class ClusterError(RuntimeError):
    """A host could not be created, reached or controlled (one line)."""
