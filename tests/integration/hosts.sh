# Sourced by tests that run a job across several hosts (docs/multi-host.md): hosts made of
# network namespaces on this machine, as real hosts on one switch.
#
#   hosts_up N              N hosts, h0 .. h(N-1): each a network namespace with its own
#                           address on one bridge (in a namespace of its own, the switch)
#                           and its own host name (a UTS namespace per process started in
#                           it). Names resolve through /etc/netns/<namespace>/hosts, which
#                           `ip netns exec` mounts over /etc/hosts. Exits 77 (skip) with the
#                           reason where this machine forbids namespaces.
#   hosts_need_open_mpi [MPIRUN]
#                           skips (77) unless MPIRUN (mpirun) is Open MPI 4, and runs jobs
#                           with it.
#   hosts_mpirun HOSTFILE ARGS...
#                           mpirun on h0 over the hosts HOSTFILE names (lines "hI slots=K"),
#                           with Open MPI's launcher agent starting its daemons in their
#                           hosts; between hosts Open MPI's TCP transport on the hosts'
#                           subnet, inside a host shared memory (vader), as on a real node.
#                           TCP keepalive on the daemons' idle connections (probes after 5
#                           s, each second, 5 of them) and each host's tcp_retries2 of 4 (a
#                           connection with data in flight gives up after about 6 s) let
#                           mpirun see a host it lost and end the job, instead of waiting.
#   hosts_pids HOST         the processes running on HOST (its namespace)
#   hosts_kill HOST         kills every process of HOST (SIGKILL): a host that died
#   hosts_hostfile FILE h0:K h1:K ...
#                           writes a hostfile.
#   hosts_link_rate RATE    every host's link to the switch limited to RATE (tc tbf, e.g.
#                           200mbit), both ways.
#   hosts_link HOST up|down the host's link to the switch.
#   hosts_link_emulate HOST DELAY_MS JITTER_MS LOSS
#                           the host's link through link_emulator.c (this kernel may have
#                           no netem; compiled with cc on first use): each frame, both ways,
#                           delayed by DELAY_MS plus a uniform draw within JITTER_MS and
#                           dropped with probability LOSS. Once per host; gone with the
#                           hosts.
# Everything made is torn down on exit, the test failed or not (hosts_down, in an EXIT trap
# that also removes the harness's $work). Names carry this shell's pid, so tests can run
# side by side, and what a killed test left is swept by the next one (hosts_sweep).
hosts_prefix="pph$$"
hosts_count=0
# A /24 of 10.x.y.0 per shell: x from 200 to 249, y the pid's next digits.
hosts_subnet="10.$((200 + $$ % 50)).$(($$ / 50 % 250))"
hosts_agent=""

hosts_down() {
  local i
  for ((i = 0; i < hosts_count; ++i)); do
    hosts_kill "h$i"  # a namespace lives on while processes run in it
    ip netns del "$hosts_prefix-h$i" 2> /dev/null || true
    rm -rf "/etc/netns/$hosts_prefix-h$i"
  done
  local pids
  pids=$(ip netns pids "$hosts_prefix-sw" 2> /dev/null || true)  # link emulators
  [[ -z $pids ]] || kill -9 $pids 2> /dev/null || true
  ip netns del "$hosts_prefix-sw" 2> /dev/null || true
}

hosts_skip() {
  echo "SKIP: $*"
  hosts_down
  exit 77
}

# What an earlier test left where it was killed (SIGKILL runs no trap): the namespaces and
# name files of shells no longer alive.
hosts_sweep() {
  local ns pid pids
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep '^pph[0-9]*-' || true); do
    pid=${ns#pph}
    pid=${pid%%-*}
    kill -0 "$pid" 2> /dev/null && continue
    pids=$(ip netns pids "$ns" 2> /dev/null || true)
    [[ -z $pids ]] || kill -9 $pids 2> /dev/null || true
    ip netns del "$ns" 2> /dev/null || true
    rm -rf "/etc/netns/$ns"
  done
}

hosts_up() {
  local n=$1 i ns
  command -v ip > /dev/null || hosts_skip "no iproute2 (ip) to make network namespaces"
  command -v unshare > /dev/null || hosts_skip "no unshare (util-linux) to give hosts their names"
  # The harness's EXIT trap removes $work; this one tears the hosts down first. A TERM or
  # INT exits through it; a SIGKILL (CTest's timeout) leaves them to the next hosts_sweep.
  trap 'hosts_down; rm -rf "$work"' EXIT
  trap 'exit 143' TERM INT
  hosts_sweep
  ip netns add "$hosts_prefix-sw" 2> /dev/null ||
    hosts_skip "this machine forbids network namespaces (ip netns add failed; root and CAP_SYS_ADMIN are needed)"
  ip -n "$hosts_prefix-sw" link add br0 type bridge 2> /dev/null ||
    hosts_skip "this machine forbids bridges in a network namespace"
  ip netns exec "$hosts_prefix-sw" unshare --uts true 2> /dev/null ||
    hosts_skip "this machine forbids UTS namespaces (unshare --uts), which give hosts their names"
  ip -n "$hosts_prefix-sw" link set br0 up
  local names="127.0.0.1 localhost"$'\n'
  for ((i = 0; i < n; ++i)); do
    names+="$hosts_subnet.$((i + 1)) h$i"$'\n'
  done
  for ((i = 0; i < n; ++i)); do
    ns="$hosts_prefix-h$i"
    ip netns add "$ns"
    hosts_count=$((i + 1))
    # veth: "eth0" inside the host, "p<i>" on the switch's bridge, made in place (nothing
    # of it in this machine's own namespace)
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$hosts_prefix-sw"
    ip -n "$hosts_prefix-sw" link set "p$i" master br0
    ip -n "$hosts_prefix-sw" link set "p$i" up
    ip -n "$ns" addr add "$hosts_subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # A connection with data in flight when a link goes down waits for TCP's retransmissions,
    # not keepalive: 15 minutes by default (tcp_retries2 15); 4 gives up after about 6 s.
    ip netns exec "$ns" sh -c 'echo 4 > /proc/sys/net/ipv4/tcp_retries2'
    mkdir -p "/etc/netns/$ns"
    printf '%s' "$names" > "/etc/netns/$ns/hosts"
  done
  # Open MPI's launcher agent, called as ssh is: AGENT HOST COMMAND-WORDS (for a shell).
  hosts_agent="$work/hosts_agent.sh"
  cat > "$hosts_agent" << EOF
#!/usr/bin/env bash
host=\$1
shift
exec ip netns exec "$hosts_prefix-\$host" unshare --uts sh -c 'hostname "\$1"; shift; exec sh -c "\$*"' agent "\$host" "\$@"
EOF
  chmod +x "$hosts_agent"
}

hosts_hostfile() {
  local file=$1 spec
  shift
  : > "$file"
  for spec in "$@"; do
    echo "${spec%%:*} slots=${spec##*:}" >> "$file"
  done
}

# Skips unless `mpirun` is Open MPI 4 (its launcher agent, vader and oob_tcp options).
hosts_need_open_mpi() {
  local program=${1:-mpirun}
  "$program" --version 2>&1 | grep -q "(Open\(RTE\| MPI\)) 4\." ||
    hosts_skip "the hosts harness needs Open MPI 4's mpirun; '$program' is $("$program" --version 2>&1 | head -1)"
  hosts_mpirun_program=$program
}

# The hosts share this machine's cores, which each host's daemon would take for its own:
# --bind-to none, or every host binds its first rank to core 0 (pp 2 on two hosts ran at
# half speed), and mpi_yield_when_idle, as an oversubscribed mpirun on one host sets it, so
# that a rank waiting for a message gives its core to one that computes.
hosts_mpirun() {
  local hostfile=$1
  shift
  local args=("${hosts_mpirun_program:-mpirun}" --allow-run-as-root --hostfile "$hostfile"
              --bind-to none --mca mpi_yield_when_idle 1
              --mca plm_rsh_agent "$hosts_agent"
              --mca btl tcp,vader,self
              --mca btl_tcp_if_include "$hosts_subnet.0/24"
              --mca oob_tcp_if_include "$hosts_subnet.0/24"
              --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 1
              --mca oob_tcp_keepalive_probes 5
              -x OMPI_ALLOW_RUN_AS_ROOT=1 -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$@")
  ip netns exec "$hosts_prefix-h0" unshare --uts sh -c 'hostname h0; shift; exec "$@"' \
    run h0 "${args[@]}"
}

hosts_link_rate() {
  local rate=$1 i
  for ((i = 0; i < hosts_count; ++i)); do
    ip netns exec "$hosts_prefix-h$i" tc qdisc replace dev eth0 root tbf rate "$rate" \
      burst 256kb latency 50ms
    ip netns exec "$hosts_prefix-sw" tc qdisc replace dev "p$i" root tbf rate "$rate" \
      burst 256kb latency 50ms
  done
}

hosts_link() {
  local host=$1 state=$2 i
  ip -n "$hosts_prefix-sw" link set "p${host#h}" "$state"
  [[ $state == up ]] || return 0
  # Addresses that went unanswered while it was down are marked failed; forget them.
  for ((i = 0; i < hosts_count; ++i)); do
    ip -n "$hosts_prefix-h$i" neigh flush all
  done
}

hosts_pids() {
  ip netns pids "$hosts_prefix-$1" 2> /dev/null || true
}

hosts_kill() {
  local pids
  pids=$(hosts_pids "$1")
  [[ -z $pids ]] || kill -9 $pids 2> /dev/null || true
}

hosts_link_emulate() {
  local host=$1 delay_ms=$2 jitter_ms=$3 loss=$4 i=${1#h}
  local sw="$hosts_prefix-sw" emulator="$work/link_emulator"
  if [[ ! -x $emulator ]]; then
    command -v cc > /dev/null || hosts_skip "no C compiler (cc) for the link emulator"
    cc -O2 -o "$emulator" "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/link_emulator.c"
  fi
  # p<i> (to the host) leaves the bridge; the emulator joins it to e<i>, whose peer f<i>
  # takes its place on the bridge.
  ip -n "$sw" link set "p$i" nomaster
  ip -n "$sw" link add "e$i" type veth peer name "f$i"
  ip -n "$sw" link set "f$i" master br0
  ip -n "$sw" link set "e$i" up
  ip -n "$sw" link set "f$i" up
  ip netns exec "$sw" "$emulator" "p$i" "e$i" "$delay_ms" "$jitter_ms" "$loss" \
    2> "$work/link_emulator_$host.err" &
  local emulator_pid=$!
  disown  # hosts_down kills it
  sleep 0.5
  if ! kill -0 "$emulator_pid" 2> /dev/null; then
    echo "FAIL: the link emulator of $host did not start:"
    cat "$work/link_emulator_$host.err"
    exit 1
  fi
}
