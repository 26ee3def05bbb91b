"""Remote control of hosts: local (optionally inside a network namespace), SSH."""
