#!/bin/sh
# mpi_netns_agent.sh HOST COMMAND...
# Open MPI's plm_rsh_agent for the CTest's two "hosts", which are network namespaces of one
# machine: instead of ssh HOST COMMAND, runs COMMAND (Open MPI's orted) in HOST's namespace,
# through rnic-run with that namespace's rnicd, with a host name of its own (a UTS namespace) so
# that Open MPI sees two nodes. $RNIC_MPI_HOSTS maps hosts: "HOST=NETNS:RUN_DIR,..."; $RNIC_RUN is
# rnic-run.
host=$1
shift
spec=
for entry in $(echo "${RNIC_MPI_HOSTS:-}" | tr ',' ' '); do
    case $entry in "$host="*) spec=${entry#*=} ;; esac
done
if [ -z "$spec" ] || [ -z "${RNIC_RUN:-}" ]; then
    echo "mpi_netns_agent: no namespace for host $host (RNIC_MPI_HOSTS, RNIC_RUN)" >&2
    exit 1
fi
ns=${spec%%:*}
run_dir=${spec#*:}
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && exec "$2" --run-dir "$3" sh -c "$4"' \
    _ "$ns" "$RNIC_RUN" "$run_dir" "$*"
