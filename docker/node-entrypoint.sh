#!/bin/sh
# Start sshd for the harness: a fresh ed25519 host key per container (the
# harness reads and pins it), and the per-cluster client key from
# $AUTHORIZED_KEY.
set -eu
key=/etc/ssh/ssh_host_ed25519_key
[ -s "$key" ] || ssh-keygen -q -t ed25519 -N '' -f "$key"
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
if [ -n "${AUTHORIZED_KEY:-}" ]; then
    printf '%s\n' "$AUTHORIZED_KEY" > /root/.ssh/authorized_keys
    chmod 600 /root/.ssh/authorized_keys
fi
# MaxSessions: the harness multiplexes many channels over one connection.
exec /usr/sbin/sshd -D -e -o HostKey="$key" -o MaxSessions=200 -o MaxStartups=100 \
    -o PasswordAuthentication=no -o PermitRootLogin=prohibit-password -o UseDNS=no
