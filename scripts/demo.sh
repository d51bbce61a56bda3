#!/usr/bin/env bash
# The main job (make demo runs it after set-up):
#   1. check and translate every example aspect;
#   2. list the join points of examples/setattr_exec.klasy in Debian's
#      vmlinux, without touching a kernel;
#   3. boot the lab kernel, weave the aspect into it, chown a file there,
#      print the trace and the status, unweave, and show that nothing of
#      klasy is left in the kernel.
cd "$(dirname "$0")/.."
source scripts/lib.sh # KLASY_CACHE, by the one rule the Go code shares
klasy=./bin/klasy
vmlinux=$KLASY_CACHE/debian/current/vmlinux
# A name of its own, so the demo never stops a lab somebody else called "demo".
lab=demo-$$

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "klasy check examples/*.klasy"
$klasy check examples/*.klasy && echo "all $(ls examples/*.klasy | wc -l) example aspects are valid"

step "klasy translate examples/netflow.klasy (xflow definition -> plain advice; first 40 lines)"
$klasy translate examples/netflow.klasy | head -n 40
echo "..."

step "klasy list: the join points of examples/setattr_exec.klasy in Debian $(cat "$KLASY_CACHE/debian/current/abi")'s vmlinux (no kernel touched)"
$klasy list --vmlinux "$vmlinux" examples/setattr_exec.klasy

cleanup() { $klasy lab down "$lab" >/dev/null 2>&1 || true; }
trap cleanup EXIT
step "klasy lab up $lab (Debian's kernel under QEMU/TCG)"
$klasy lab up "$lab"
modules_before=$($klasy lab exec "$lab" -- cat /proc/modules | wc -l)

step "klasy weave --lab $lab -v examples/setattr_exec.klasy"
$klasy weave --lab "$lab" -v examples/setattr_exec.klasy

step "in the lab: touch /tmp/x; chown 1:1 /tmp/x; chown 2 /tmp/x"
$klasy lab exec "$lab" -- sh -c 'touch /tmp/x && chown 1:1 /tmp/x && chown 2 /tmp/x && ls -ln /tmp/x'

step "klasy trace --lab $lab (time, cpu, pid, comm, aspect#advice, function, file:line, pc, values: inode, old uid, new uid)"
$klasy trace --lab "$lab"

step "klasy status --lab $lab"
$klasy status --lab "$lab"

step "klasy unweave --lab $lab setattr_exec"
$klasy unweave --lab "$lab" setattr_exec
$klasy status --lab "$lab"
modules_after=$($klasy lab exec "$lab" -- cat /proc/modules | wc -l)
kprobes=$($klasy lab exec "$lab" -- sh -c 'wc -l < /sys/kernel/debug/kprobes/list')
echo "modules before the weave: $modules_before, after the unweave: $modules_after; kprobes registered: $kprobes"

step "klasy lab down $lab"
$klasy lab down "$lab"
trap - EXIT

cat <<'MSG'

demo: every example aspect checked and translated; setattr_exec woven into
a running Debian 6.1 kernel, its records traced, and unwoven again with
the kernel's modules and kprobes as they were.
MSG
