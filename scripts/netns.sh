#!/usr/bin/env bash
# netns.sh: make and remove a two-namespace test topology for the AF_XDP
# datapath, so that an AF_XDP server and a kernel-stack client can talk over a
# real link on one machine without touching the host's interfaces.
#
#   ${PREFIX}-srv  [ ${PREFIX}s 10.77.0.1/24 ] <-- veth --> [ ${PREFIX}c 10.77.0.2/24 ]  ${PREFIX}-cli
#
# What `up` makes (default PREFIX=psp):
#   - network namespaces ${PREFIX}-srv (the server, where the AF_XDP socket
#     binds) and ${PREFIX}-cli (the client, ordinary UDP sockets);
#   - a veth pair, ${PREFIX}s in the server namespace and ${PREFIX}c in the
#     client one, with `--queues N` TX and RX queues on both ends (one AF_XDP
#     socket binds per queue; default 1), MTU 1500, links and lo up;
#   - addresses SERVER_IP/IP_PREFIX_LEN and CLIENT_IP/IP_PREFIX_LEN
#     (defaults 10.77.0.1, 10.77.0.2, 24);
#   - permanent neighbour entries each way, so that the first request of a
#     benchmark does not wait for ARP (the XDP program passes ARP to the
#     kernel, which still answers it: tests delete the entry to check);
#   - IPv6 disabled on both veth ends, so no router solicitations, MLD or
#     DAD frames reach the AF_XDP socket (tolerated if IPv6 is absent);
#   - offloads that break AF_XDP turned off on both ends, with
#     `ethtool -K DEV tx off rx off gro off tso off gso off` (features the
#     driver cannot change are tolerated, with a warning):
#       tx  (TX checksum offload): veth would pass the client's UDP packets
#           on with CHECKSUM_PARTIAL, i.e. the UDP checksum left unfilled
#           (only the pseudo-header sum), and an XDP program / AF_XDP socket
#           sees those raw bytes, so every datagram would fail checksum
#           verification (checked: with tx on, frames captured on the
#           server end fail the UDP checksum);
#       rx  (RX checksum offload): keep the kernel from trusting a checksum
#           nobody verified (CHECKSUM_UNNECESSARY) on frames that AF_XDP
#           writes and the client's stack receives;
#       gro (generic receive offload): merges consecutive packets of a flow
#           into one large skb; XDP runs per frame before that merge, so
#           AF_XDP and the kernel stack (and tcpdump) would disagree about
#           what arrived;
#       tso/gso (segmentation offloads): defer splitting large sends into
#           MTU-sized packets past the point where XDP sees them, so a frame
#           larger than the MTU (or a not-yet-segmented super-packet) would
#           reach the AF_XDP socket.
#
# Notes for the AF_XDP side: veth has no zero-copy AF_XDP support, so sockets
# on it run in copy mode (XDP_COPY). With N queues, the client's flows are
# hashed over its TX queues and arrive on the matching server RX queue, so a
# server must bind a socket on every queue (or use --queues 1).
#
# Usage:
#   netns.sh up [--queues N] [--prefix NAME]   (re)create it; prints key=value lines
#   netns.sh down [--prefix NAME]              delete it; fine if already gone
#   netns.sh status [--prefix NAME]            print key=value lines; exit 1 if absent
#
# The key=value lines on stdout (everything else goes to stderr):
#   server_ns client_ns server_dev client_dev server_ip client_ip
#   server_mac client_mac queues
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2 and ethtool.
set -euo pipefail

PROG=${0##*/}

usage() {
    cat >&2 <<EOF
usage: $PROG up [--queues N] [--prefix NAME]
       $PROG down [--prefix NAME]
       $PROG status [--prefix NAME]

Makes (up), removes (down) or describes (status) namespaces NAME-srv and
NAME-cli joined by a veth pair NAMEs <-> NAMEc, for AF_XDP tests.
  --queues N     TX/RX queues on each veth end, 1..64 (up only; default 1)
  --prefix NAME  name prefix, 1..14 of [A-Za-z0-9_-] (default psp)
Environment: SERVER_IP (10.77.0.1), CLIENT_IP (10.77.0.2), IP_PREFIX_LEN (24).
EOF
}

die_usage() {
    echo "$PROG: $*" >&2
    usage
    exit 2
}

die() {
    echo "$PROG: $*" >&2
    exit 1
}

warn() {
    echo "$PROG: warning: $*" >&2
}

# ---- arguments ------------------------------------------------------------

[[ $# -ge 1 ]] || die_usage "missing command"
CMD=$1
shift
case $CMD in
up | down | status) ;;
-h | --help | help)
    usage
    exit 0
    ;;
*) die_usage "unknown command '$CMD'" ;;
esac

PREFIX=psp
QUEUES=1
while [[ $# -gt 0 ]]; do
    case $1 in
    --queues | --prefix)
        [[ $# -ge 2 ]] || die_usage "$1 needs a value"
        opt=$1 val=$2
        shift 2
        ;;
    --queues=* | --prefix=*)
        opt=${1%%=*} val=${1#*=}
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die_usage "unknown argument '$1'" ;;
    esac
    case $opt in
    --queues)
        [[ $CMD == up ]] || die_usage "--queues is only for 'up'"
        if ! [[ $val =~ ^[1-9][0-9]*$ ]] || ((val > 64)); then
            die_usage "--queues wants an integer 1..64, not '$val'"
        fi
        QUEUES=$val
        ;;
    --prefix)
        # The veth names are PREFIX plus one letter, and interface names
        # have at most 15 bytes.
        [[ $val =~ ^[A-Za-z0-9_-]{1,14}$ ]] ||
            die_usage "--prefix wants 1..14 of [A-Za-z0-9_-], not '$val'"
        PREFIX=$val
        ;;
    esac
done

SERVER_IP=${SERVER_IP:-10.77.0.1}
CLIENT_IP=${CLIENT_IP:-10.77.0.2}
IP_PREFIX_LEN=${IP_PREFIX_LEN:-24}
ipv4_re='^(([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])\.){3}([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])$'
[[ $SERVER_IP =~ $ipv4_re ]] || die_usage "SERVER_IP '$SERVER_IP' is not an IPv4 address"
[[ $CLIENT_IP =~ $ipv4_re ]] || die_usage "CLIENT_IP '$CLIENT_IP' is not an IPv4 address"
[[ $SERVER_IP != "$CLIENT_IP" ]] || die_usage "SERVER_IP and CLIENT_IP are the same"
if ! [[ $IP_PREFIX_LEN =~ ^[0-9]+$ ]] || ((IP_PREFIX_LEN < 1 || IP_PREFIX_LEN > 30)); then
    die_usage "IP_PREFIX_LEN wants 1..30, not '$IP_PREFIX_LEN'"
fi

SRV_NS=$PREFIX-srv
CLI_NS=$PREFIX-cli
SRV_DEV=${PREFIX}s
CLI_DEV=${PREFIX}c

[[ $EUID -eq 0 ]] || die "must run as root (network namespaces and links need CAP_NET_ADMIN)"
command -v ip >/dev/null || die "ip (iproute2) not found"

# ---- helpers --------------------------------------------------------------

ns_exists() {
    local list line
    list=$(ip netns list 2>/dev/null) || return 1
    # Lines look like "NAME" or "NAME (id: N)".
    while IFS= read -r line; do
        [[ ${line%% *} == "$1" ]] && return 0
    done <<<"$list"
    return 1
}

# mac NS DEV: the device's MAC address.
mac() {
    local out
    out=$(ip -n "$1" -o link show dev "$2")
    [[ $out =~ link/ether\ ([0-9a-f:]{17}) ]] || die "no MAC on $2 in $1"
    echo "${BASH_REMATCH[1]}"
}

# ipv4 NS DEV: the device's first IPv4 address, without the prefix length.
ipv4() {
    local out
    out=$(ip -n "$1" -o -4 addr show dev "$2")
    [[ $out =~ inet\ ([0-9.]+)/ ]] || die "no IPv4 address on $2 in $1"
    echo "${BASH_REMATCH[1]}"
}

# queues NS DEV: the device's RX queue count.
queues() {
    local out
    out=$(ip -n "$1" -d -o link show dev "$2")
    [[ $out =~ numrxqueues\ ([0-9]+) ]] || die "no queue count for $2 in $1"
    echo "${BASH_REMATCH[1]}"
}

# offloads_off NS DEV: turn off the offloads that break AF_XDP (see header).
offloads_off() {
    local ns=$1 dev=$2 f k
    command -v ethtool >/dev/null || die "ethtool not found"
    # ethtool lists the "Actual changes" on stdout, which is for key=value.
    if ! ip netns exec "$ns" ethtool -K "$dev" tx off rx off gro off tso off gso off &>/dev/null; then
        # Some feature is fixed on this kernel: change the others one at a time.
        for f in tx rx gro tso gso; do
            ip netns exec "$ns" ethtool -K "$dev" "$f" off &>/dev/null ||
                warn "$ns/$dev: could not turn '$f' off"
        done
    fi
    # Say which are still on (ethtool -k names them in long form).
    k=$(ip netns exec "$ns" ethtool -k "$dev" 2>/dev/null) || return 0
    for f in tx-checksumming rx-checksumming generic-receive-offload \
        tcp-segmentation-offload generic-segmentation-offload; do
        [[ $k =~ (^|$'\n')$f:\ off ]] || warn "$ns/$dev: $f is still on"
    done
}

print_info() {
    # Everything is read back from the namespaces (not from the arguments),
    # and gathered before printing so that a failure prints nothing.
    local srv_q cli_q srv_ip cli_ip srv_mac cli_mac
    srv_q=$(queues "$SRV_NS" "$SRV_DEV")
    cli_q=$(queues "$CLI_NS" "$CLI_DEV")
    [[ $srv_q == "$cli_q" ]] || warn "queue counts differ: $SRV_DEV $srv_q, $CLI_DEV $cli_q"
    srv_ip=$(ipv4 "$SRV_NS" "$SRV_DEV")
    cli_ip=$(ipv4 "$CLI_NS" "$CLI_DEV")
    srv_mac=$(mac "$SRV_NS" "$SRV_DEV")
    cli_mac=$(mac "$CLI_NS" "$CLI_DEV")
    echo "server_ns=$SRV_NS"
    echo "client_ns=$CLI_NS"
    echo "server_dev=$SRV_DEV"
    echo "client_dev=$CLI_DEV"
    echo "server_ip=$srv_ip"
    echo "client_ip=$cli_ip"
    echo "server_mac=$srv_mac"
    echo "client_mac=$cli_mac"
    echo "queues=$srv_q"
}

# ---- commands -------------------------------------------------------------

do_down() {
    local ns
    for ns in "$SRV_NS" "$CLI_NS"; do
        if ns_exists "$ns"; then
            # Deleting the namespace destroys the veth end inside it, and
            # with it the peer.
            ip netns del "$ns"
        fi
    done
}

do_up() {
    if ns_exists "$SRV_NS" || ns_exists "$CLI_NS"; then
        echo "$PROG: removing the existing $PREFIX topology first" >&2
        do_down
    fi

    # If anything below fails, leave nothing half-made behind.
    UP_DONE=0
    trap '((UP_DONE)) || { echo "$PROG: up failed, removing what was made" >&2; do_down; }' EXIT

    ip netns add "$SRV_NS"
    ip netns add "$CLI_NS"
    # Created inside the server namespace, so no name can clash with the
    # host's interfaces; the peer goes straight into the client namespace.
    ip -n "$SRV_NS" link add "$SRV_DEV" numtxqueues "$QUEUES" numrxqueues "$QUEUES" \
        type veth peer name "$CLI_DEV" netns "$CLI_NS" \
        numtxqueues "$QUEUES" numrxqueues "$QUEUES"

    local ns dev ip
    for ns in "$SRV_NS" "$CLI_NS"; do
        if [[ $ns == "$SRV_NS" ]]; then dev=$SRV_DEV ip=$SERVER_IP; else dev=$CLI_DEV ip=$CLIENT_IP; fi
        ip -n "$ns" link set dev lo up
        ip -n "$ns" link set dev "$dev" mtu 1500
        ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1" 2>/dev/null ||
            true # no IPv6 in this kernel: nothing to silence
        ip -n "$ns" addr add "$ip/$IP_PREFIX_LEN" dev "$dev"
        offloads_off "$ns" "$dev"
        ip -n "$ns" link set dev "$dev" up
    done

    local srv_mac cli_mac
    srv_mac=$(mac "$SRV_NS" "$SRV_DEV")
    cli_mac=$(mac "$CLI_NS" "$CLI_DEV")
    ip -n "$SRV_NS" neigh replace "$CLIENT_IP" lladdr "$cli_mac" dev "$SRV_DEV" nud permanent
    ip -n "$CLI_NS" neigh replace "$SERVER_IP" lladdr "$srv_mac" dev "$CLI_DEV" nud permanent

    print_info
    # shellcheck disable=SC2034 # read by the EXIT trap
    UP_DONE=1
}

do_status() {
    if ! ns_exists "$SRV_NS" || ! ns_exists "$CLI_NS"; then
        echo "$PROG: no $PREFIX topology (namespaces $SRV_NS, $CLI_NS)" >&2
        exit 1
    fi
    if ! ip -n "$SRV_NS" link show dev "$SRV_DEV" >/dev/null 2>&1 ||
        ! ip -n "$CLI_NS" link show dev "$CLI_DEV" >/dev/null 2>&1; then
        echo "$PROG: $PREFIX namespaces exist but the veth pair is missing" >&2
        exit 1
    fi
    print_info
}

case $CMD in
up) do_up ;;
down) do_down ;;
status) do_status ;;
esac
