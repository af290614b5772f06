#!/usr/bin/env python3
"""A chaos run of the example nodes against the real sidecar.

It starts its own nats-server (free loopback port, throw-away store), makes
the log stream and the buckets (`crewlet retention init` with a YAML it
writes, checked by `crewlet validate`), starts `crewlet retention run`, a
publisher that appends records continuously, two Python nodes and one JS
node, then for a bounded time kills a node with SIGKILL and restarts it at
intervals drawn from a seeded schedule, starts a joiner midway, runs a
one-shot backup, evicts a node that never comes back (so that real gate
records land on the log), and samples about every 200 ms the invariant:

    for every node the sidecar counts (crewlet retention status --json,
    domains[0].nodes, state "counted"), the node's committed checkpoint + 1
    >= the log's first_seq: it can always fetch what follows it;

and beside it that no position the sidecar reads is ahead of the node's
committed checkpoint (positions are reported after the commit).

At the end it stops everything, checks that the trim advanced (first_seq >
1), that every surviving node's database holds the same records over their
common range (and the same as the log, where the log still has them), that
no node stored a gate record, and prints a JSON summary on stdout. Exit 1
on any violation or when the trim never advanced.

    scripts/check-examples [--seconds 60] [--seed 1] [--keep]

Needs PYTHONPATH to reach nats-py and NODE_PATH the `nats` package
(scripts/check-examples sets both), the sidecar binary (target/debug/crewlet
or $CREWLET_BIN) and nats-server (.tools/nats/bin or $NATS_SERVER_BIN).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import nats

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY_NODE = os.path.join(TOP, "examples", "python", "node.py")
JS_NODE = os.path.join(TOP, "examples", "js", "node.mjs")
STREAM = "EXAMPLE_LOG"
GATE = "example.gate"
RETENTION = {
    "tick": "1s",
    "min_age": "1s",
    # snapshot_interval × (snapshots_kept + 1) must stay below min_age (a
    # rule between fields that allow_unsafe_limits does not relax): 400ms.
    "snapshot_interval": "400ms",
    "snapshots_kept": 1,
    "snapshot_quorum": 2,
    "presence_ttl": "3s",
    "fence_window": "2s",
    "held_alarm_after": "0s",
    "max_clock_skew": "500ms",
    "backup_max_age": "1h",
    "backup_owner": "test",
    "allow_unsafe_limits": True,
}


def say(msg: str) -> None:
    print(f"[check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_yaml(url: str) -> str:
    lines = ["node:", "  id: check-sidecar", "nats:", f"  url: {url}", "retention:"]
    for k, v in RETENTION.items():
        lines.append(f"  {k}: {str(v).lower() if isinstance(v, bool) else v}")
    lines += ["trim:", "  enabled: true", "domains:", "  - name: example", f"    stream: {STREAM}",
              f"    gate_subject: {GATE}", ""]
    return "\n".join(lines)


class Proc:
    """One child process, restartable, its output appended to a log file."""

    def __init__(self, name: str, argv: List[str], log_path: str, env: Dict[str, str]):
        self.name, self.argv, self.log_path, self.env = name, argv, log_path, env
        self.p: Optional[subprocess.Popen] = None
        self.killed = False  # exited because this check killed it
        self.starts = 0

    def start(self) -> None:
        self.killed = False
        self.starts += 1
        with open(self.log_path, "ab") as out:
            self.p = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                      env=self.env, cwd=TOP)

    def alive(self) -> bool:
        return self.p is not None and self.p.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.killed = True
            self.p.send_signal(sig)

    def stop(self, timeout: float = 8.0) -> Optional[int]:
        """SIGTERM, then SIGKILL after `timeout`; the exit code (None if it
        had to be killed)."""
        if self.p is None:
            return None
        if self.p.poll() is None:
            self.killed = True
            self.p.send_signal(signal.SIGTERM)
            try:
                return self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                return None
        return self.p.returncode

    def tail(self, n: int = 8) -> List[str]:
        try:
            with open(self.log_path, "rb") as f:
                return [l.decode(errors="replace").rstrip() for l in f.readlines()[-n:]]
        except OSError:
            return []


class Check:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.bin = os.path.abspath(args.bin)
        self.work = tempfile.mkdtemp(prefix="crewlet-examples-")
        self.nodes_dir = os.path.join(self.work, "nodes")
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.nodes_dir)
        os.makedirs(self.logs)
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.config = os.path.join(self.work, "crewlet.yaml")
        self.env = dict(os.environ)
        for var in ("PYTHONPATH", "NODE_PATH"):  # the children run in the repository
            if self.env.get(var):
                self.env[var] = os.pathsep.join(os.path.abspath(p) for p in self.env[var].split(os.pathsep))
        self.procs: Dict[str, Proc] = {}
        self.nodes: Dict[str, Dict[str, Any]] = {}  # name -> {"proc", "kind", "dir"}
        self.samples = 0
        self.violations: List[Dict[str, Any]] = []
        self.violation_count = 0
        self.kills: List[Dict[str, Any]] = []
        self.failures: List[Dict[str, Any]] = []
        self.published = 0
        self.contract_fallback = False
        self.max_first_seq_seen = 0
        self.counted_seen: Dict[str, int] = {}
        self.margins: Dict[str, int] = {}  # least checkpoint + 1 - first_seq seen per node
        self.contract: Optional[Dict[str, Any]] = None
        self.status_errors = 0
        self.t0 = time.monotonic()

    # -- processes ---------------------------------------------------------

    def run_cli(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([self.bin, *argv, "--config", self.config], capture_output=True, text=True, cwd=TOP)
        if check and r.returncode != 0:
            raise SystemExit(f"crewlet {' '.join(argv)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    def spawn(self, name: str, argv: List[str]) -> Proc:
        p = Proc(name, argv, os.path.join(self.logs, f"{name}.log"), self.env)
        self.procs[name] = p
        p.start()
        return p

    def add_node(self, name: str, kind: str, extra: List[str]) -> Proc:
        d = os.path.join(self.nodes_dir, name)
        if kind == "py":
            argv = [sys.executable, PY_NODE, "--server", self.url, "--node", name, "--stream", STREAM,
                    "--dir", d, *extra]
        else:
            argv = ["node", JS_NODE, "--server", self.url, "--node", name, "--stream", STREAM,
                    "--dir", d, *extra]
        p = self.spawn(name, argv)
        self.nodes[name] = {"proc": p, "kind": kind, "dir": d}
        return p

    # -- reading a node's committed checkpoint -----------------------------

    def checkpoint(self, name: str) -> Optional[int]:
        n = self.nodes.get(name)
        if n is None:
            return None
        if n["kind"] == "py":
            path = os.path.join(n["dir"], "node.db")
            if not os.path.exists(path):
                return None
            conn = sqlite3.connect(path, timeout=5)
            try:
                row = conn.execute("SELECT seq FROM checkpoint WHERE stream = ?", (STREAM,)).fetchone()
            except sqlite3.OperationalError:
                return None  # the schema is not there yet
            finally:
                conn.close()
            return row[0] if row else 0
        path = os.path.join(n["dir"], "state.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)["checkpoint"]["seq"]

    def records(self, name: str) -> Dict[int, tuple]:
        n = self.nodes[name]
        if n["kind"] == "py":
            conn = sqlite3.connect(os.path.join(n["dir"], "node.db"))
            try:
                return {s: (subj, bytes(d)) for s, subj, d in
                        conn.execute("SELECT seq, subject, data FROM records")}
            finally:
                conn.close()
        with open(os.path.join(n["dir"], "state.json")) as f:
            st = json.load(f)
        return {s: (subj, base64.b64decode(d)) for s, subj, d in st["records"]}

    # -- the broker ----------------------------------------------------------

    async def stream_state(self) -> Dict[str, Any]:
        m = await self.nc.request(f"$JS.API.STREAM.INFO.{STREAM}", b"", timeout=5)
        return json.loads(m.data)["state"]

    async def publisher(self) -> None:
        """Appends records continuously: `--rate` a second, in small bursts."""
        js = self.nc.jetstream()
        period = 0.05
        per = max(1, round(self.args.rate * period))
        while not self.stop_publishing.is_set():
            for _ in range(per):
                self.published += 1
                n = self.published
                body = json.dumps({"n": n, "key": f"k{n % 17}", "value": random.Random(n).random()}).encode()
                try:
                    await js.publish(f"{STREAM}.rec.k{n % 17}", body, timeout=2)
                except Exception as e:
                    self.published -= 1
                    say(f"publish failed: {e}")
                    break
            await asyncio.sleep(period)

    async def ensure_contract(self) -> None:
        """The sidecar's duty holder writes `_contract` in the floors bucket.
        FALLBACK for sidecars that do not write it yet: when the key is still
        absent after 5 s, this check writes the same shape itself. Remove this
        once every supported sidecar writes the row."""
        kv = await self.js.key_value("crewlet_floors")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                self.contract = json.loads((await kv.get("_contract")).value)
                say("the sidecar wrote _contract")
                return
            except Exception:
                await asyncio.sleep(0.2)
        self.contract_fallback = True
        say("FALLBACK: the sidecar wrote no _contract within 5 s; writing it from the check")
        row = {
            "format": 2, "presence_ttl": RETENTION["presence_ttl"],
            "domains": [{"stream": STREAM, "gate_subject": GATE, "generation": 0,
                         "snapshots": {"interval": RETENTION["snapshot_interval"],
                                       "quorum": RETENTION["snapshot_quorum"]},
                         "backups": {"policy": "engine", "max_age": RETENTION["backup_max_age"]},
                         "min_age": RETENTION["min_age"]}],
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "by": "examples/check.py (fallback)",
        }
        await kv.put("_contract", json.dumps(row).encode())
        self.contract = row

    # -- the invariant -------------------------------------------------------

    async def status(self) -> Optional[Dict[str, Any]]:
        p = await asyncio.create_subprocess_exec(
            self.bin, "retention", "status", "--json", "--config", self.config,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=TOP)
        try:
            out, _ = await asyncio.wait_for(p.communicate(), 10)
        except asyncio.TimeoutError:
            p.kill()
            await p.wait()
            self.status_errors += 1
            return None
        if p.returncode not in (0, 1):
            self.status_errors += 1
            return None
        try:
            return json.loads(out)
        except ValueError:
            self.status_errors += 1
            return None

    def violation(self, kind: str, **fields: Any) -> None:
        self.violation_count += 1
        v = {"kind": kind, "t": round(time.monotonic() - self.t0, 2), **fields}
        if len(self.violations) < 50:
            self.violations.append(v)
        say(f"VIOLATION {json.dumps(v)}")

    async def sample(self) -> None:
        st = await self.status()
        if st is None:
            return
        dom = st["domains"][0]
        counted = [n for n in dom.get("nodes", []) if n.get("state") == "counted"]
        # first_seq before the checkpoints: a checkpoint only moves up, so a
        # later read can hide a violation but never invent one.
        state = await self.stream_state()
        first_seq = state["first_seq"]
        self.max_first_seq_seen = max(self.max_first_seq_seen, first_seq)
        self.samples += 1
        for n in counted:
            name = n["node"]
            self.counted_seen[name] = self.counted_seen.get(name, 0) + 1
            if name not in self.nodes:
                continue  # not one of ours (the ghost)
            cp = self.checkpoint(name)
            if cp is None:
                self.violation("counted_without_database", node=name, first_seq=first_seq)
                continue
            margin = cp + 1 - first_seq
            self.margins[name] = min(self.margins.get(name, margin), margin)
            if cp + 1 < first_seq:
                self.violation("checkpoint_behind_log", node=name, checkpoint=cp, first_seq=first_seq,
                               reported=n.get("seq"))
            if isinstance(n.get("seq"), int) and n["seq"] > cp:
                self.violation("reported_ahead_of_commit", node=name, checkpoint=cp, reported=n["seq"])

    def watch_processes(self) -> None:
        for name, p in self.procs.items():
            if p.p is not None and p.p.poll() is not None and not p.killed and name != "backup-once":
                self.failures.append({"process": name, "exit": p.p.returncode, "tail": p.tail()})
                say(f"{name} exited on its own ({p.p.returncode})")
                p.killed = True  # reported once

    # -- the run -------------------------------------------------------------

    def schedule(self) -> List[Dict[str, Any]]:
        """The kills, drawn from the seed: which node, when, for how long."""
        rng = random.Random(self.args.seed)
        plan, t = [], 3.0
        while True:
            t += rng.uniform(2.5, 5.5)
            down = rng.uniform(0.3, 3.0)
            if t + down > self.args.seconds - 2:
                return plan
            plan.append({"at": round(t, 2), "node": rng.choice(["py-1", "py-2", "js-1"]),
                         "down": round(down, 2)})
            t += down

    async def main(self) -> int:
        nats_bin = os.path.abspath(os.environ.get("NATS_SERVER_BIN")
                                   or os.path.join(TOP, ".tools", "nats", "bin", "nats-server"))
        if not os.path.exists(nats_bin):
            raise SystemExit(f"no nats-server at {nats_bin}: run scripts/install-nats-server")
        if not os.path.exists(self.bin):
            raise SystemExit(f"no sidecar binary at {self.bin}: build it (cargo build) or set CREWLET_BIN")
        self.spawn("nats-server", [nats_bin, "-a", "127.0.0.1", "-p", str(self.port), "-js",
                                   "-sd", os.path.join(self.work, "store")])
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                self.nc = await nats.connect(self.url, connect_timeout=1, max_reconnect_attempts=-1,
                                             reconnect_time_wait=0.5)
                break
            except Exception:
                await asyncio.sleep(0.1)
        else:
            raise SystemExit("nats-server did not come up")
        self.js = self.nc.jetstream(timeout=5)
        with open(self.config, "w") as f:
            f.write(config_yaml(self.url))
        # The log, as `crewlet validate` wants it (64 MiB: a warning only,
        # with allow_unsafe_limits).
        await self.nc.request(f"$JS.API.STREAM.CREATE.{STREAM}", json.dumps({
            "name": STREAM, "subjects": [f"{STREAM}.>", GATE], "storage": "file",
            "retention": "limits", "discard": "new", "max_bytes": 64 * 1024 * 1024,
            "deny_delete": True, "num_replicas": 1}).encode(), timeout=5)
        self.run_cli("retention", "init")
        v = self.run_cli("validate", check=False)
        if v.returncode != 0:
            raise SystemExit(f"crewlet validate exited {v.returncode}:\n{v.stdout}{v.stderr}")
        # A node that is gone for good: its position row pins the log at 0
        # until it is evicted, which puts real gate records on the log.
        positions = await self.js.key_value("crewlet_positions")
        created = json.loads((await self.nc.request(f"$JS.API.STREAM.INFO.{STREAM}", b"")).data)["created"]
        await positions.put(f"{STREAM}.ghost", json.dumps({
            "node": "ghost", "stream": STREAM, "seq": 0, "generation": 0, "stream_created": created,
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "status": "ok"}).encode())
        sidecar = self.spawn("sidecar", [self.bin, "retention", "run", "--config", self.config])
        await self.ensure_contract()

        self.stop_publishing = asyncio.Event()
        pub = asyncio.create_task(self.publisher())
        self.add_node("py-1", "py", ["--backup-every", "2s"])
        self.add_node("py-2", "py", [])
        self.add_node("js-1", "js", ["--backup-every", "3s"])
        plan = self.schedule()
        say(f"work dir {self.work}; {len(plan)} kills planned (seed {self.args.seed})")

        start = time.monotonic()
        elapsed = lambda: time.monotonic() - start
        evicted = backed_up = joined = False
        pending = list(plan)
        down: Optional[Dict[str, Any]] = None
        while elapsed() < self.args.seconds:
            t = elapsed()
            if not evicted and t >= 2:
                evicted = True
                r = self.run_cli("retention", "evict", "ghost", "--confirm", "ghost",
                                 "--reason", "examples/check.py: never coming back", "--by", "check",
                                 check=False)
                say(f"evict ghost: exit {r.returncode}")
                if r.returncode != 0:
                    self.failures.append({"process": "evict", "exit": r.returncode,
                                          "tail": (r.stdout + r.stderr).splitlines()[-5:]})
            if not backed_up and t >= self.args.seconds / 3:
                backed_up = True
                self.spawn("backup-once", [sys.executable, PY_NODE, "--backup", "--server", self.url,
                                           "--node", "py-2", "--stream", STREAM,
                                           "--dir", os.path.join(self.nodes_dir, "py-2")])
            if not joined and t >= self.args.seconds / 2:
                joined = True
                say("starting the joiner")
                self.add_node("py-join", "py", ["--join", "--peers", self.nodes_dir])
            if down is None and pending and t >= pending[0]["at"]:
                k = pending.pop(0)
                proc = self.nodes[k["node"]]["proc"]
                proc.signal(signal.SIGKILL)
                proc.p.wait()
                down = {**k, "until": t + k["down"]}
                self.kills.append({"node": k["node"], "at": round(t, 2), "down": k["down"]})
                say(f"killed {k['node']} (-9) for {k['down']} s")
            if down is not None and t >= down["until"]:
                self.nodes[down["node"]]["proc"].start()
                say(f"restarted {down['node']}")
                down = None
            self.watch_processes()
            began = time.monotonic()
            try:
                await self.sample()
            except Exception as e:
                self.status_errors += 1
                say(f"sample failed: {e}")
            await asyncio.sleep(max(0.0, 0.2 - (time.monotonic() - began)))
        if down is not None:
            self.nodes[down["node"]]["proc"].start()

        # Wind down: stop publishing, let the nodes catch up, then stop them.
        self.stop_publishing.set()
        await pub
        last_seq = (await self.stream_state())["last_seq"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            cps = {n: self.checkpoint(n) for n in self.nodes}
            if all(c is not None and c >= last_seq for c in cps.values()):
                break
            await self.sample()
            await asyncio.sleep(0.2)
        final = await self.stream_state()
        self.watch_processes()
        exits = {}
        for name in self.nodes:
            exits[name] = self.procs[name].stop()
        exits["sidecar"] = sidecar.stop()
        for name, code in exits.items():
            if code != 0:
                self.failures.append({"process": name, "exit": code, "when": "stopping (SIGTERM)",
                                      "tail": self.procs[name].tail()})
        once = self.procs.get("backup-once")
        if once is None or once.p.wait() != 0:
            self.failures.append({"process": "backup-once", "exit": once and once.p.returncode,
                                  "tail": once.tail() if once else []})
        checkpoints = {n: self.checkpoint(n) for n in self.nodes}
        content = await self.compare(final)
        await self.nc.close()
        self.procs["nats-server"].stop()

        ok = (self.violation_count == 0 and not self.failures and final["first_seq"] > 1
              and not content["mismatches"] and not content["gate_records_stored"]
              and self.counted_seen.get("py-join", 0) > 0)
        summary = {
            "ok": ok,
            "seed": self.args.seed,
            "seconds": self.args.seconds,
            "wall_seconds": round(time.monotonic() - self.t0, 1),
            "samples": self.samples,
            "status_errors": self.status_errors,
            "violations": self.violation_count,
            "violation_examples": self.violations,
            "kills": len(self.kills),
            "kill_schedule": self.kills,
            "published": self.published,
            "first_seq": final["first_seq"],
            "last_seq": final["last_seq"],
            "trim_advanced": final["first_seq"] > 1,
            "checkpoints": checkpoints,
            "counted_samples": self.counted_seen,
            "least_margin": self.margins,
            "content": content,
            "contract_fallback": self.contract_fallback,
            "contract": self.contract,
            "failures": self.failures,
            "work_dir": self.work if (self.args.keep or not ok) else None,
        }
        print(json.dumps(summary, indent=2))
        if not self.args.keep and ok:
            shutil.rmtree(self.work, ignore_errors=True)
        return 0 if ok else 1

    async def compare(self, final: Dict[str, Any]) -> Dict[str, Any]:
        """The surviving nodes' records over their common range, against
        each other and against what the log still holds."""
        recs, missing = {}, []
        for n in self.nodes:
            try:
                recs[n] = self.records(n)
            except (OSError, sqlite3.Error, ValueError, KeyError):
                missing.append(n)
        if missing:
            self.failures.append({"process": ",".join(missing), "exit": None,
                                  "when": "comparing: no readable database"})
        if not recs:
            return {"range": None, "records": {}, "checked_against_log": 0, "mismatches": [],
                    "gate_records_stored": {}}
        cps = {n: self.checkpoint(n) or 0 for n in recs}
        lo = max(min(r) if r else cps[n] + 1 for n, r in recs.items())
        hi = min(cps.values())
        mismatches = []
        names = sorted(recs)
        base = names[0]
        for s in range(lo, hi + 1):
            want = recs[base].get(s)
            for n in names[1:]:
                if recs[n].get(s) != want:
                    mismatches.append({"seq": s, "nodes": [base, n]})
                    break
            if len(mismatches) >= 10:
                break
        # What the log still holds of that range: the same records (a gate
        # record there is one the nodes skipped).
        checked = 0
        for s in range(max(lo, final["first_seq"]), min(hi, final["first_seq"] + 5000) + 1):
            try:
                m = await self.js.get_msg(STREAM, seq=s)
            except Exception:
                continue  # not there (erased or purged meanwhile)
            checked += 1
            want = None if m.subject == GATE else (m.subject, m.data or b"")
            if recs[base].get(s) != want:
                mismatches.append({"seq": s, "nodes": [base, "the log"]})
                if len(mismatches) >= 10:
                    break
        gate = {n: sum(1 for v in r.values() if v[0] == GATE) for n, r in recs.items()}
        return {"range": [lo, hi], "records": {n: len(r) for n, r in recs.items()},
                "checked_against_log": checked,
                "mismatches": mismatches, "gate_records_stored": {n: c for n, c in gate.items() if c}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60, help="how long the chaos lasts (default 60)")
    p.add_argument("--seed", type=int, default=1, help="the kill schedule's seed (default 1)")
    p.add_argument("--rate", type=float, default=50, help="records published a second (default 50)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (kept anyway on failure)")
    p.add_argument("--bin", default=os.environ.get("CREWLET_BIN") or os.path.join(TOP, "target", "debug", "crewlet"),
                   help="the sidecar binary [$CREWLET_BIN, else target/debug/crewlet]")
    args = p.parse_args()
    check = Check(args)
    try:
        return asyncio.run(check.main())
    finally:
        for proc in check.procs.values():
            if proc.alive():
                proc.p.kill()
                proc.p.wait()


if __name__ == "__main__":
    sys.exit(main())
