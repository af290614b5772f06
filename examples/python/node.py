#!/usr/bin/env python3
"""A reference crewlet node in Python: nats-py and SQLite, one asyncio file.

It applies one JetStream stream (the log) into a SQLite database and keeps
the node contract of docs/contract.md, so that the sidecar can trim the log
safely beneath it:

- presence: `crewlet_presence` key <node>, re-put every third of the
  presence TTL, with roles ["data"] and the process's started_at;
- positions: `crewlet_positions` key <stream>.<node>, all seven fields,
  written only after the SQLite transaction that applied the records (and
  moved the checkpoint) has committed;
- gate records (the domain's gate_subject) are not data: skipped, their
  sequence still counted as applied;
- snapshots: every snapshot interval a copy of the database, verified, and
  registered in `crewlet_snapshots` (key <node>, compare-and-set);
- backups: `--backup-every` (a job inside the node) or `--backup` (a one-shot
  job run beside it against its data directory) copies the database,
  verifies it and announces a manifest in `crewlet_backups`;
- joiner: `--join` starts a brand-new node from another node's newest
  verified snapshot (or from sequence 1 while the log still holds
  everything), under a `join` hold in `crewlet_holds` that is confirmed
  before anything is read and released once the node has applied past it;
- divergence: when the records after its checkpoint are gone from the log
  (or the record at its checkpoint is not the one it applied, or the stream
  was recreated) it reports `status: "log_diverged"`, stops applying and
  exits 3. Rebuilding from a snapshot is left to the operator.

It never deletes its own positions row, gives its presence up on SIGTERM,
and survives kill -9: the checkpoint lives in the same SQLite transaction
as the data, so a restart resumes exactly after the last committed record.

The sidecar publishes, in `crewlet_floors` key `_contract`, the settings a
node needs (presence TTL, gate subject, generation, snapshot interval, backup
policy). Until that row exists the node uses its flags and the presence
bucket's max_age, and it re-reads the row every second.

Run it (PYTHONPATH must reach nats-py; scripts/install-example-deps puts it
in .tools/nats-py):

    PYTHONPATH=.tools/nats-py python3 examples/python/node.py \
        --server nats://127.0.0.1:4222 --node py-1 --stream CREWLET_TRACKER_LOG \
        --dir /var/lib/py-1 --backup-every 1h

docs/examples.md describes every flag and what the check in examples/check.py
does with it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import nats
import nats.errors
import nats.js.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

VERSION = "example-python/1"

# Exit codes.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DIVERGED = 3

NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
STREAM_NAME = re.compile(r"^[^\s.*>/\\]{1,255}$")


# ---------------------------------------------------------------------------
# Small helpers: time, durations, logging, validation


def now_rfc3339() -> str:
    """UTC now, RFC 3339 with nanoseconds and `Z` (what the schemas want)."""
    ns = time.time_ns()
    secs, frac = divmod(ns, 1_000_000_000)
    base = dt.datetime.fromtimestamp(secs, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}Z"


def rfc3339_in(seconds: float) -> str:
    ns = time.time_ns() + int(seconds * 1e9)
    secs, frac = divmod(ns, 1_000_000_000)
    base = dt.datetime.fromtimestamp(secs, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}Z"


_UNITS = {
    "ns": 1e-9, "nsec": 1e-9, "nanos": 1e-9,
    "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "micros": 1e-6,
    "ms": 1e-3, "msec": 1e-3, "millis": 1e-3, "milliseconds": 1e-3, "millisecond": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-zµ]+)\s*")


def parse_duration(text: Any) -> float:
    """Seconds in a humantime duration: "30s", "100ms", "7d", "1h 30m",
    "1h30m", "2w". A bare number, an unknown unit or an empty string is an
    error (ValueError)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"not a duration: {text!r}")
    pos, total, s = 0, 0.0, text.strip()
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m or m.end() == pos:
            raise ValueError(f"not a duration: {text!r}")
        unit = m.group(2)
        if unit not in _UNITS:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        total += float(m.group(1)) * _UNITS[unit]
        pos = m.end()
    return total


def log(event: str, **fields: Any) -> None:
    fields = {"at": now_rfc3339(), "event": event, **fields}
    print(json.dumps(fields, default=str), file=sys.stderr, flush=True)


def digest(subject: str, data: bytes) -> str:
    h = hashlib.sha256()
    h.update(subject.encode())
    h.update(b"\0")
    h.update(data)
    return h.hexdigest()


INSTANT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|\+00:00)$")


def check_row(kind: str, row: Dict[str, Any]) -> None:
    """The schemas' required fields and shapes (docs/schemas/), checked
    before a write: one malformed row blocks the trim for the whole fleet."""
    def instant(name: str) -> None:
        v = row.get(name)
        if not isinstance(v, str) or not INSTANT.match(v) or v.endswith("\n"):
            raise ValueError(f"{kind}: {name} {v!r} is not an RFC 3339 UTC instant")

    def seq(name: str, v: Any) -> None:
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{kind}: {name} {v!r} is not a sequence")

    def node_id(name: str) -> None:
        v = row.get(name)
        if not isinstance(v, str) or not NODE_ID.match(v):
            raise ValueError(f"{kind}: {name} {v!r} breaks the node id rule")

    if kind == "presence":
        node_id("node")
        instant("started_at")
    elif kind == "position":
        node_id("node")
        if not STREAM_NAME.match(row.get("stream", "")):
            raise ValueError("position: bad stream")
        seq("seq", row.get("seq"))
        seq("generation", row.get("generation"))
        instant("stream_created")
        instant("updated_at")
        if row.get("status") not in ("ok", "log_diverged"):
            raise ValueError("position: bad status")
    elif kind == "snapshot":
        node_id("node")
        instant("updated_at")
        if row.get("skip_reason") not in ("", "sole_node", "lagging", "unhydrated", "deferred",
                                          "insufficient_space", "ahead_of_log", "log_diverged", "failed"):
            raise ValueError("snapshot: bad skip_reason")
        for stream, a in row.get("artefacts", {}).items():
            seq("position", a.get("position"))
            seq("generation", a.get("generation"))
            if not isinstance(a.get("verified"), bool):
                raise ValueError("snapshot: verified is not a boolean")
            if not isinstance(a.get("taken_at"), str) or not INSTANT.match(a["taken_at"]):
                raise ValueError(f"snapshot: artefacts[{stream}].taken_at is not an instant")
    elif kind == "backup":
        node_id("id")
        node_id("node")
        instant("taken_at")
        if row.get("completed_at") is not None:
            instant("completed_at")
        for stream, p in row.get("positions", {}).items():
            seq(f"positions[{stream}]", p)
    elif kind == "hold":
        seq("seq", row.get("seq"))
        if not isinstance(row.get("owner"), str) or not row["owner"].strip():
            raise ValueError("hold: blank owner")
        instant("expires_at")
        if row.get("kind") not in (None, "backup", "join", "operator"):
            raise ValueError("hold: bad kind")


def encode(kind: str, row: Dict[str, Any]) -> bytes:
    check_row(kind, row)
    return json.dumps(row, separators=(",", ":")).encode()


# ---------------------------------------------------------------------------
# The database: the applied records and the checkpoint, in one transaction


SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq     INTEGER PRIMARY KEY,  -- the log's sequence of the record
    subject TEXT    NOT NULL,
    data    BLOB    NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoint (
    stream         TEXT    PRIMARY KEY,
    seq            INTEGER NOT NULL,  -- last applied, inclusive (gate records too)
    stream_created TEXT    NOT NULL,  -- the incarnation the sequences belong to
    generation     INTEGER NOT NULL,
    digest         TEXT    NOT NULL   -- sha256 of the record at seq, to recognise it later
);
"""


class Checkpoint:
    def __init__(self, seq: int = 0, stream_created: str = "", generation: int = 0, digest: str = ""):
        self.seq = seq
        self.stream_created = stream_created
        self.generation = generation
        self.digest = digest


class Database:
    def __init__(self, path: str, stream: str):
        self.path = path
        self.stream = stream
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.executescript(SCHEMA)

    def checkpoint(self) -> Checkpoint:
        row = self.conn.execute(
            "SELECT seq, stream_created, generation, digest FROM checkpoint WHERE stream = ?",
            (self.stream,),
        ).fetchone()
        return Checkpoint(*row) if row else Checkpoint()

    def apply(self, records: List[Tuple[int, str, bytes, bool]], cp: Checkpoint) -> Checkpoint:
        """Applies `records` (seq, subject, data, is_gate) and moves the
        checkpoint to the last one, in one transaction. Returns the new
        checkpoint once committed."""
        last_seq, last_digest = cp.seq, cp.digest
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            for seq, subject, data, is_gate in records:
                if not is_gate:
                    c.execute("INSERT OR REPLACE INTO records(seq, subject, data) VALUES (?, ?, ?)",
                              (seq, subject, data))
                last_seq, last_digest = seq, digest(subject, data)
            c.execute(
                "INSERT OR REPLACE INTO checkpoint(stream, seq, stream_created, generation, digest)"
                " VALUES (?, ?, ?, ?, ?)",
                (self.stream, last_seq, cp.stream_created, cp.generation, last_digest),
            )
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        return Checkpoint(last_seq, cp.stream_created, cp.generation, last_digest)

    def set_incarnation(self, stream_created: str, generation: int) -> Checkpoint:
        cp = self.checkpoint()
        self.conn.execute(
            "INSERT OR REPLACE INTO checkpoint(stream, seq, stream_created, generation, digest)"
            " VALUES (?, ?, ?, ?, ?)",
            (self.stream, cp.seq, stream_created, generation, cp.digest),
        )
        return self.checkpoint()

    def close(self) -> None:
        self.conn.close()


def copy_database(src_path: str, dst_path: str) -> None:
    """A consistent copy of a live SQLite database (the online backup API)."""
    tmp = dst_path + ".tmp"
    for p in (tmp, tmp + "-wal", tmp + "-shm"):
        if os.path.exists(p):
            os.unlink(p)
    src = sqlite3.connect(f"file:{src_path}?mode=ro", uri=True)
    dst = sqlite3.connect(tmp)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
    finally:
        dst.close()
        src.close()
    os.replace(tmp, dst_path)


def verify_copy(path: str, stream: str) -> Tuple[int, int, str, int]:
    """Opens a copy and checks it: integrity, the checkpoint, the records.
    Returns (checkpoint seq, record count, stream_created, generation)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        ok = conn.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise RuntimeError(f"{path}: quick_check says {ok}")
        row = conn.execute(
            "SELECT seq, stream_created, generation FROM checkpoint WHERE stream = ?", (stream,)
        ).fetchone()
        if row is None:
            raise RuntimeError(f"{path}: no checkpoint for {stream}")
        count, top = conn.execute("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM records").fetchone()
        if top > row[0]:
            raise RuntimeError(f"{path}: a record at {top} past the checkpoint {row[0]}")
        return row[0], count, row[1], row[2]
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# The broker side


class Diverged(Exception):
    """The log no longer holds what this node needs, or holds another
    history than the one it applied."""


class Stop(Exception):
    pass


class Settings:
    """What the node needs to know about its domain: from the `_contract`
    row when there is one, else from flags and the buckets."""

    def __init__(self, args: argparse.Namespace):
        self.gate_subject: Optional[str] = args.gate_subject
        self.presence_ttl: Optional[float] = None     # from _contract
        self.bucket_ttl: Optional[float] = None       # the presence bucket's max_age
        self.generation: Optional[int] = None         # from _contract
        self.floors_generation: Optional[int] = None  # from the floors row
        self.snapshot_interval: Optional[float] = (
            parse_duration(args.snapshot_every) if args.snapshot_every else None)
        self.backup_policy: Optional[str] = None
        self.contract_seen = False

    @property
    def lease_every(self) -> float:
        ttls = [t for t in (self.presence_ttl, self.bucket_ttl) if t]
        return max(0.1, min(ttls) / 3) if ttls else 10.0

    @property
    def current_generation(self) -> int:
        if self.generation is not None:
            return self.generation
        if self.floors_generation is not None:
            return self.floors_generation
        return 0


class Node:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.id: str = args.node
        self.stream: str = args.stream
        self.dir: str = args.dir
        self.db_path = os.path.join(self.dir, "node.db")
        self.snap_dir = os.path.join(self.dir, "snapshots")
        self.backup_dir = os.path.join(self.dir, "backups")
        self.started_at = now_rfc3339()
        self.settings = Settings(args)
        self.stop = asyncio.Event()
        self.nc: Any = None
        self.js: Any = None
        self.kv: Dict[str, Any] = {}
        self.db: Optional[Database] = None
        self.cp = Checkpoint()
        self.reported = -1         # the last seq whose position row was written
        self.diverged = False
        self.stream_created: str = ""
        self.join_hold: Optional[Tuple[str, int, int]] = None  # key, revision, seq
        self.own_backups: List[Tuple[str, str]] = []          # (completed_at, key)

    # -- connection and buckets ------------------------------------------

    async def connect(self) -> None:
        servers = [s.strip() for s in self.args.server.split(",") if s.strip()]

        async def on_error(e: Exception) -> None:
            log("nats_error", error=str(e))

        while True:
            try:
                self.nc = await nats.connect(
                    servers=servers, name=f"crewlet-example/{self.id}",
                    connect_timeout=2, reconnect_time_wait=0.5,
                    max_reconnect_attempts=-1, error_cb=on_error)
                break
            except Exception as e:  # the broker is not up yet
                log("waiting_for_broker", error=str(e))
                if await self.sleep(1.0):
                    raise Stop()
        self.js = self.nc.jetstream(timeout=5)
        for role in ("presence", "positions", "holds", "backups", "snapshots", "floors"):
            self.kv[role] = await self.open_bucket(getattr(self.args, f"bucket_{role}"))

    async def open_bucket(self, name: str) -> Any:
        """Opens a bucket, never creates it: `crewlet retention init` makes
        each one with its settings (the presence bucket's TTL above all)."""
        while True:
            try:
                return await self.js.key_value(name)
            except nats.js.errors.BucketNotFoundError:
                log("waiting_for_bucket", bucket=name, remedy="crewlet retention init")
            except Exception as e:
                log("bucket_open_failed", bucket=name, error=str(e))
            if await self.sleep(1.0):
                raise Stop()

    async def sleep(self, seconds: float) -> bool:
        """Sleeps, or returns True at once when the node is told to stop."""
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
            return True
        except asyncio.TimeoutError:
            return False

    async def api(self, subject: str, body: Dict[str, Any] | None = None) -> Dict[str, Any]:
        payload = json.dumps(body).encode() if body is not None else b""
        msg = await self.nc.request(subject, payload, timeout=5)
        reply = json.loads(msg.data)
        if "error" in reply:
            raise RuntimeError(f"{subject}: {reply['error']}")
        return reply

    async def stream_info(self) -> Dict[str, Any]:
        """The raw stream info. Its `created` is the broker's string to the
        nanosecond; nats-py's StreamInfo.created is a datetime, cut to the
        microsecond, and would name another incarnation of the log."""
        return await self.api(f"$JS.API.STREAM.INFO.{self.stream}")

    async def get_json(self, role: str, key: str) -> Tuple[Optional[Dict[str, Any]], int]:
        try:
            e = await self.kv[role].get(key)
        except nats.js.errors.KeyNotFoundError:
            return None, 0
        if not e.value:
            return None, e.revision
        return json.loads(e.value), e.revision

    async def read_bucket(self, role: str) -> Dict[str, Tuple[Dict[str, Any], int]]:
        """Every live key of a bucket (small buckets only)."""
        out: Dict[str, Tuple[Dict[str, Any], int]] = {}
        watcher = await self.kv[role].watchall(ignore_deletes=True)
        try:
            while True:
                e = await watcher.updates(timeout=5)
                if e is None:
                    break
                if e.value:
                    try:
                        out[e.key] = (json.loads(e.value), e.revision)
                    except ValueError:
                        pass
        finally:
            await watcher.stop()
        return out

    # -- the contract the sidecar publishes ------------------------------

    async def refresh_settings(self) -> None:
        s = self.settings
        contract, _ = await self.get_json("floors", "_contract")
        if contract is not None:
            if not s.contract_seen:
                log("contract_read", format=contract.get("format"))
            s.contract_seen = True
            try:
                s.presence_ttl = parse_duration(contract.get("presence_ttl"))
            except ValueError:
                pass
            for d in contract.get("domains") or []:
                if d.get("stream") != self.stream:
                    continue
                if "gate_subject" in d:
                    s.gate_subject = d.get("gate_subject")
                if isinstance(d.get("generation"), int):
                    s.generation = d["generation"]
                snaps = d.get("snapshots")
                if isinstance(snaps, dict):
                    try:
                        s.snapshot_interval = parse_duration(snaps.get("interval"))
                    except ValueError:
                        pass
                backups = d.get("backups")
                if isinstance(backups, dict):
                    s.backup_policy = backups.get("policy")
        floors, _ = await self.get_json("floors", self.stream)
        if floors is not None and isinstance(floors.get("generation"), int):
            s.floors_generation = floors["generation"]
        try:
            st = await self.kv["presence"].status()
            s.bucket_ttl = float(st.ttl) if st.ttl else None
        except Exception:
            pass

    # -- rows --------------------------------------------------------------

    async def lease(self) -> None:
        row = {"node": self.id, "roles": ["data"], "version": VERSION, "started_at": self.started_at}
        await self.kv["presence"].put(self.id, encode("presence", row))

    async def leave(self) -> None:
        try:
            await self.kv["presence"].delete(self.id)
        except Exception as e:
            log("leave_failed", error=str(e))

    async def report(self, status: str = "ok") -> None:
        """The position row: only ever the committed checkpoint."""
        cp = self.cp
        row = {
            "node": self.id,
            "stream": self.stream,
            "seq": cp.seq,
            "generation": cp.generation,
            "stream_created": cp.stream_created or self.stream_created,
            "updated_at": now_rfc3339(),
            "status": status,
        }
        await self.kv["positions"].put(f"{self.stream}.{self.id}", encode("position", row))
        self.reported = cp.seq

    async def register_snapshot(self, artefact: Optional[Dict[str, Any]], skip: str) -> None:
        """Replaces this stream's artefact in the node's one snapshot row,
        with compare-and-set so that another stream's artefact is kept."""
        kv = self.kv["snapshots"]
        for _ in range(5):
            row, rev = await self.get_json("snapshots", self.id)
            artefacts = dict((row or {}).get("artefacts") or {})
            if artefact is None:
                artefacts.pop(self.stream, None)
            else:
                artefacts[self.stream] = artefact
            new = {"node": self.id, "updated_at": now_rfc3339(), "skip_reason": skip,
                   "artefacts": artefacts}
            body = encode("snapshot", new)
            try:
                if rev:
                    await kv.update(self.id, body, last=rev)
                else:
                    await kv.create(self.id, body)
                return
            except nats.js.errors.KeyWrongLastSequenceError:
                continue
        raise RuntimeError("the snapshot row kept changing under this node")

    # -- startup checks ----------------------------------------------------

    async def check_against_log(self, info: Dict[str, Any]) -> None:
        """Raises Diverged when the log cannot continue this database."""
        cp = self.cp
        created = info["created"]
        first_seq = info["state"]["first_seq"]
        last_seq = info["state"]["last_seq"]
        if cp.stream_created and cp.stream_created != created:
            raise Diverged(f"the stream was recreated: the database applied the incarnation "
                           f"created {cp.stream_created}, the log is {created}")
        if cp.seq > last_seq:
            raise Diverged(f"the checkpoint {cp.seq} is past the log's last sequence {last_seq} "
                           "(the log was restored from an older copy)")
        if first_seq > cp.seq + 1:
            raise Diverged(f"the log starts at {first_seq}; this node needs {cp.seq + 1} on")
        if cp.seq >= first_seq and cp.digest:
            try:
                m = await self.js.get_msg(self.stream, seq=cp.seq)
                if digest(m.subject, m.data or b"") != cp.digest:
                    raise Diverged(f"the record at the checkpoint {cp.seq} is not the one applied")
            except nats.js.errors.NotFoundError:
                pass  # erased, or purged since: nothing to compare

    async def adopt_generation(self) -> None:
        """Takes the current generation (and the stream's created) into the
        checkpoint: at once for a database that holds nothing yet; after a
        reanchor only once the log is checked to continue it."""
        gen = self.settings.current_generation
        assert self.db is not None
        if self.cp.stream_created == self.stream_created and self.cp.generation == gen:
            return
        if self.cp.seq > 0 and self.cp.generation != gen:
            info = await self.stream_info()
            await self.check_against_log(info)
            log("generation_adopted", old=self.cp.generation, new=gen)
        self.cp = self.db.set_incarnation(self.stream_created, gen)

    async def diverge(self, why: str) -> None:
        self.diverged = True
        log("log_diverged", reason=why, checkpoint=self.cp.seq,
            remedy="rebuild this node from a snapshot or backup, or evict it "
                   f"(crewlet retention evict {self.id} -confirm {self.id})")
        try:
            await self.report("log_diverged")
            await self.register_snapshot(None, "log_diverged")
        except Exception as e:
            log("report_failed", error=str(e))

    # -- the joiner ----------------------------------------------------------

    def hold_key(self) -> str:
        # Not `join-<op-id>`: those ids belong to the sidecar's readmissions.
        return f"{self.stream}.joiner-{self.id}"[: len(self.stream) + 1 + 64]

    async def donors(self) -> List[Tuple[int, str, str]]:
        """Verified artefacts of the current generation other nodes
        registered, newest first, with the file a donor keeps it in (here a
        shared directory; in production an object store or the donor's API)."""
        gen = self.settings.current_generation
        found = []
        for key, (row, _) in (await self.read_bucket("snapshots")).items():
            if key == self.id or row.get("skip_reason") == "log_diverged":
                continue
            a = (row.get("artefacts") or {}).get(self.stream)
            if not a or a.get("verified") is not True or a.get("generation") != gen:
                continue
            path = os.path.join(self.args.peers, key, "snapshots", f"{self.stream}.{a['position']}.db")
            found.append((a["position"], key, path))
        found.sort(reverse=True)
        return found

    async def place_hold(self, seq: int) -> Tuple[str, int]:
        key = self.hold_key()
        row = {"seq": seq, "owner": self.id, "kind": "join",
               "reason": f"{self.id} joins {self.stream} from {seq}",
               "expires_at": rfc3339_in(parse_duration(self.args.join_hold_ttl))}
        body = encode("hold", row)
        kv = self.kv["holds"]
        old, rev = await self.get_json("holds", key)
        if old is None:
            rev = await kv.create(key, body)
        else:
            rev = await kv.update(key, body, last=rev)
        log("hold_placed", key=key, seq=seq)
        return key, rev

    async def release_hold(self) -> None:
        if not self.join_hold:
            return
        key, rev, seq = self.join_hold
        try:
            await self.kv["holds"].delete(key, last=rev)
        except nats.js.errors.APIError as e:
            if e.err_code not in (10071, 10164):
                log("hold_release_failed", key=key, error=str(e))  # tried again after the next commit
                return
            # Not at the revision written: replaced meanwhile, not ours to lift.
        except Exception as e:
            log("hold_release_failed", key=key, error=str(e))
            return
        log("hold_released", key=key, seq=seq, checkpoint=self.cp.seq)
        self.join_hold = None

    async def holder_tick(self) -> float:
        """The duty holder's tick: its lease bucket keeps a lease 3 ticks."""
        try:
            info = await self.api(f"$JS.API.STREAM.INFO.KV_{self.args.bucket_duty}")
            max_age = info["config"].get("max_age", 0) / 1e9
            if max_age > 0:
                return max_age / 3
        except Exception:
            pass
        return 10.0

    async def lease_held(self) -> bool:
        try:
            duty = await self.js.key_value(self.args.bucket_duty)
            await duty.get("retention")
            return True
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.BucketNotFoundError):
            return False

    async def confirm_hold(self, seq: int) -> bool:
        """Confirms a hold as `crewlet retention hold` does: the log still
        holds `seq`, and an answer published after the hold (a rewritten
        floors row, or the second `_tick` since) stands behind it, then the
        log is checked again. False: too late (the records are gone)."""
        async def first_seq() -> int:
            return (await self.stream_info())["state"]["first_seq"]

        before, _ = await self.get_json("floors", self.stream)
        if await first_seq() > seq:
            return False
        if not await self.lease_held():
            return True  # no duty holder: no tick in flight can purge
        tick0, _ = await self.get_json("floors", "_tick")
        first_tick = (tick0 or {}).get("at")
        ticks: List[str] = []
        budget = (await self.holder_tick()) * 2 + 2
        while True:
            deadline = time.monotonic() + budget
            while time.monotonic() < deadline:
                if await self.sleep(0.1):
                    raise Stop()
                now, _ = await self.get_json("floors", self.stream)
                t, _ = await self.get_json("floors", "_tick")
                if t and t.get("at") != first_tick and t.get("at") not in ticks \
                        and self.stream not in (t.get("unpublished") or []):
                    ticks.append(t["at"])
                later = now is not None and (before is None or now.get("at") != before.get("at"))
                later = later or (now is not None and len(ticks) >= 2)
                if later:
                    floor = now.get("floor")
                    fs = await first_seq()
                    if fs > seq or (isinstance(floor, int) and floor > seq):
                        return False
                    log("hold_confirmed", seq=seq, floor=floor, first_seq=fs)
                    return True
            log("hold_unconfirmed", seq=seq, waited=budget, note="the duty holder may be stalled; waiting on")

    async def join(self) -> None:
        """Makes a brand-new node's database: from the newest verified
        snapshot another node registered, or empty while the log still holds
        everything; under a confirmed join hold."""
        os.makedirs(self.dir, exist_ok=True)
        while not self.stop.is_set():
            await self.refresh_settings()
            info = await self.stream_info()
            self.stream_created = info["created"]
            state = info["state"]
            chosen: Optional[Tuple[int, str, str]] = None
            for position, donor, path in await self.donors():
                if os.path.exists(path):
                    chosen = (position, donor, path)
                    break
            if chosen is None and state["first_seq"] <= 1:
                chosen = (0, "", "")
            if chosen is None:
                log("join_waiting", reason="no verified snapshot to start from, and the log "
                                           f"starts at {state['first_seq']}")
                if await self.sleep(2.0):
                    raise Stop()
                continue
            position, donor, path = chosen
            key, rev = await self.place_hold(position + 1)
            self.join_hold = (key, rev, position + 1)
            if not await self.confirm_hold(position + 1):
                log("hold_too_late", seq=position + 1)
                await self.release_hold()
                continue
            tmp = self.db_path + ".joining"
            if donor:
                try:
                    await asyncio.to_thread(shutil.copyfile, path, tmp)
                    seq, count, created, gen = await asyncio.to_thread(verify_copy, tmp, self.stream)
                except Exception as e:  # the donor moved on: try again
                    log("join_copy_failed", donor=donor, error=str(e))
                    continue
                if seq != position or created != self.stream_created:
                    log("join_copy_mismatch", donor=donor, seq=seq, position=position)
                    continue
                for p in (self.db_path + "-wal", self.db_path + "-shm"):
                    if os.path.exists(p):
                        os.unlink(p)
                os.replace(tmp, self.db_path)
                log("joined_from_snapshot", donor=donor, position=position, records=count)
            else:
                log("joined_from_start", first_seq=state["first_seq"])
            return
        raise Stop()

    # -- applying the log ----------------------------------------------------

    async def consumer(self, start: int) -> Tuple[Any, str]:
        """An ephemeral pull consumer on the whole log from `start`, no acks
        (the checkpoint in the database is the node's own ack)."""
        name = f"{self.id}-{int(time.time() * 1000)}"
        cfg = ConsumerConfig(
            name=name, ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start,
            inactive_threshold=30.0, mem_storage=True, num_replicas=1)
        await self.js.add_consumer(self.stream, config=cfg)
        sub = await self.js.pull_subscribe_bind(consumer=name, stream=self.stream)
        return sub, name

    async def drop_consumer(self, sub: Any, name: str) -> None:
        try:
            await sub.unsubscribe()
        except Exception:
            pass
        try:
            await self.js.delete_consumer(self.stream, name)
        except Exception:
            pass

    async def apply_loop(self) -> None:
        assert self.db is not None
        expected = self.cp.seq + 1
        sub, name = await self.consumer(expected)
        recreated_at: Optional[int] = None  # a gap seen again after recreating: records erased
        idle = 0
        try:
            while not self.stop.is_set():
                try:
                    msgs = await sub.fetch(batch=256, timeout=1.0)
                except (asyncio.TimeoutError, nats.errors.TimeoutError):
                    idle += 1
                    if idle % 5 == 0:  # a consumer lost meanwhile (a long disconnection)
                        try:
                            await sub.consumer_info()
                        except nats.js.errors.NotFoundError:
                            await self.drop_consumer(sub, name)
                            sub, name = await self.consumer(expected)
                    continue
                idle = 0
                batch: List[Tuple[int, str, bytes, bool]] = []
                gap = False
                for m in msgs:
                    seq = m.metadata.sequence.stream
                    if seq < expected:
                        continue
                    if seq > expected:
                        info = await self.stream_info()
                        if info["state"]["first_seq"] > expected:
                            raise Diverged(f"records {expected}..{info['state']['first_seq'] - 1} "
                                           "are gone from the log")
                        if recreated_at != expected:
                            gap = True  # a delivery lost in transit: read again from expected
                            break
                        log("records_erased", first=expected, last=seq - 1)
                    recreated_at = None
                    is_gate = self.settings.gate_subject is not None and m.subject == self.settings.gate_subject
                    batch.append((seq, m.subject, m.data or b"", is_gate))
                    expected = seq + 1
                if batch:
                    # One transaction: the records and the checkpoint. A few
                    # milliseconds, run on the loop so that nothing else
                    # touches the checkpoint meanwhile.
                    self.cp = self.db.apply(batch, self.cp)
                    # After the commit, never before: a trim may delete
                    # everything up to what a position says.
                    try:
                        await self.report()
                    except Exception as e:
                        log("report_failed", error=str(e), checkpoint=self.cp.seq)
                    if self.join_hold and self.reported >= self.join_hold[2]:
                        await self.release_hold()
                if gap:
                    await self.drop_consumer(sub, name)
                    sub, name = await self.consumer(expected)
                    recreated_at = expected
        finally:
            await self.drop_consumer(sub, name)

    # -- periodic jobs -------------------------------------------------------

    async def presence_loop(self) -> None:
        while not self.stop.is_set():
            try:
                await self.lease()
            except Exception as e:
                log("lease_failed", error=str(e))
            if await self.sleep(self.settings.lease_every):
                return

    async def settings_loop(self) -> None:
        """Re-reads `_contract` and the stream every second: a generation
        change, a recreated stream, a report that failed."""
        while not self.stop.is_set():
            if await self.sleep(1.0):
                return
            try:
                await self.refresh_settings()
                info = await self.stream_info()
                if info["created"] != self.stream_created:
                    raise Diverged(f"the stream was recreated (created {info['created']})")
                if self.settings.current_generation != self.cp.generation:
                    await self.adopt_generation()
                    await self.report()
                elif self.reported < self.cp.seq:
                    await self.report()
            except Diverged:
                raise
            except Exception as e:
                log("settings_refresh_failed", error=str(e))

    async def snapshot_loop(self) -> None:
        last = time.monotonic()
        while not self.stop.is_set():
            if await self.sleep(0.1):
                return
            every = self.settings.snapshot_interval
            if not every or time.monotonic() - last < every:
                continue
            last = time.monotonic()
            if self.cp.seq == 0:
                continue  # nothing worth donating yet
            try:
                await self.take_snapshot()
            except Exception as e:
                log("snapshot_failed", error=str(e))
                try:
                    await self.register_snapshot(None, "failed")
                except Exception:
                    pass

    async def take_snapshot(self) -> None:
        os.makedirs(self.snap_dir, exist_ok=True)
        taken_at = now_rfc3339()
        tmp = os.path.join(self.snap_dir, "taking.db")
        await asyncio.to_thread(copy_database, self.db_path, tmp)
        seq, count, created, gen = await asyncio.to_thread(verify_copy, tmp, self.stream)
        path = os.path.join(self.snap_dir, f"{self.stream}.{seq}.db")
        os.replace(tmp, path)
        if self.diverged:
            return
        await self.register_snapshot(
            {"position": seq, "generation": gen, "taken_at": taken_at, "verified": True}, "")
        # Keep the newest few: a joiner may be copying the one before.
        kept = sorted(glob.glob(os.path.join(self.snap_dir, f"{self.stream}.*.db")),
                      key=lambda p: int(p.rsplit(".", 2)[-2]), reverse=True)
        for old in kept[self.args.snapshots_kept:]:
            os.unlink(old)

    async def backup_loop(self) -> None:
        every = parse_duration(self.args.backup_every)
        last = time.monotonic()
        while not self.stop.is_set():
            if await self.sleep(min(every, 0.5)):
                return
            if time.monotonic() - last < every or self.cp.seq == 0 or self.diverged:
                continue
            last = time.monotonic()
            try:
                await backup_once(self)
            except Exception as e:
                log("backup_failed", error=str(e))

    # -- the whole life --------------------------------------------------------

    async def run(self) -> int:
        await self.connect()
        await self.refresh_settings()
        info = await self.wait_for_stream()
        self.stream_created = info["created"]
        leftover, rev = await self.get_json("holds", self.hold_key())
        if leftover is not None and leftover.get("owner") == self.id:
            self.join_hold = (self.hold_key(), rev, leftover["seq"])  # ours, from a run that stopped
        if self.args.join and not os.path.exists(self.db_path):
            await self.join()
        os.makedirs(self.dir, exist_ok=True)
        self.db = Database(self.db_path, self.stream)
        self.cp = self.db.checkpoint()
        log("starting", node=self.id, stream=self.stream, checkpoint=self.cp.seq,
            first_seq=info["state"]["first_seq"], last_seq=info["state"]["last_seq"],
            generation=self.settings.current_generation, contract=self.settings.contract_seen)
        try:
            await self.check_against_log(await self.stream_info())
            await self.adopt_generation()
        except Diverged as e:
            if self.cp.seq == 0 and not self.cp.stream_created:
                # A node that never held anything has nothing to diverge
                # from: writing a row now would pin the log at 0.
                log("unhydrated", reason=str(e), remedy="start it with --join", code=EXIT_USAGE)
                return EXIT_USAGE
            await self.diverge(str(e))
            return EXIT_DIVERGED
        # The position first (the committed checkpoint), then the lease: a
        # live data node without a position would pin the log at 0.
        await self.report()
        if self.join_hold and self.reported >= self.join_hold[2]:
            await self.release_hold()
        tasks = [asyncio.create_task(c) for c in (
            self.presence_loop(), self.settings_loop(), self.snapshot_loop(), self.apply_loop())]
        if self.args.backup_every:
            tasks.append(asyncio.create_task(self.backup_loop()))
        stopper = asyncio.create_task(self.stop.wait())
        code = EXIT_OK
        done, _ = await asyncio.wait(tasks + [stopper], return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if t is stopper or t.cancelled():
                continue
            e = t.exception()
            if isinstance(e, Diverged):
                await self.diverge(str(e))
                code = EXIT_DIVERGED
            elif e is not None and not isinstance(e, Stop):
                log("failed", error=repr(e))
                code = EXIT_FAILED
        self.stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        stopper.cancel()
        # A clean stop gives the lease up; the positions row stays and pins.
        await self.leave()
        log("stopped", checkpoint=self.cp.seq, code=code)
        return code

    async def wait_for_stream(self) -> Dict[str, Any]:
        while True:
            try:
                return await self.stream_info()
            except Exception as e:
                log("waiting_for_stream", stream=self.stream, error=str(e))
            if await self.sleep(1.0):
                raise Stop()

    async def close(self) -> None:
        if self.db:
            self.db.close()
        if self.nc:
            try:
                await self.nc.drain()
            except Exception:
                pass


async def backup_once(node: Node) -> Dict[str, Any]:
    """Copies the node's database, verifies the copy and announces its
    manifest (key <node>.<id>). Keeps the two newest manifests of the node."""
    os.makedirs(node.backup_dir, exist_ok=True)
    taken_at = now_rfc3339()
    backup_id = "b" + re.sub(r"[^0-9]", "", taken_at)[:17]
    path = os.path.join(node.backup_dir, f"{backup_id}.db")
    await asyncio.to_thread(copy_database, node.db_path, path)
    seq, count, created, gen = await asyncio.to_thread(verify_copy, path, node.stream)
    manifest = {
        "id": backup_id, "node": node.id, "taken_at": taken_at,
        "completed_at": now_rfc3339(), "verified": True,
        "owner": node.args.backup_owner or f"{node.id}-backup",
        "positions": {node.stream: seq},
    }
    key = f"{node.id}.{backup_id}"
    await node.kv["backups"].put(key, encode("backup", manifest))
    log("backup_announced", id=backup_id, position=seq, records=count)
    # Old manifests may go once newer ones count.
    if not node.own_backups:
        for k, (row, _) in (await node.read_bucket("backups")).items():
            if row.get("node") == node.id and k != key and row.get("completed_at"):
                node.own_backups.append((row["completed_at"], k))
    node.own_backups.append((manifest["completed_at"], key))
    node.own_backups.sort()
    while len(node.own_backups) > 2:
        _, old = node.own_backups.pop(0)
        try:
            await node.kv["backups"].delete(old)
        except Exception:
            pass
    files = sorted(glob.glob(os.path.join(node.backup_dir, "b*.db")))
    for old in files[:-2]:
        os.unlink(old)
    return manifest


def parse_args(argv: List[str]) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description="A reference crewlet node: applies a JetStream log into SQLite.")
    p.add_argument("--server", default=env("NATS_URL", "nats://127.0.0.1:4222"),
                   help="NATS URL(s), comma-separated [$NATS_URL]")
    p.add_argument("--node", default=env("CREWLET_NODE"), help="this node's id [$CREWLET_NODE]")
    p.add_argument("--stream", default=env("CREWLET_STREAM"), help="the log [$CREWLET_STREAM]")
    p.add_argument("--dir", default=env("CREWLET_NODE_DIR"),
                   help="the node's data directory: node.db, snapshots/, backups/ [$CREWLET_NODE_DIR]")
    p.add_argument("--gate-subject", default=env("CREWLET_GATE_SUBJECT"),
                   help="the domain's gate subject until the _contract row names it")
    p.add_argument("--snapshot-every", default=None,
                   help="snapshot interval until the _contract row names one (e.g. 6h)")
    p.add_argument("--snapshots-kept", type=int, default=2, help="snapshot files kept (default 2)")
    p.add_argument("--backup-every", default=None, help="take and announce a backup this often (e.g. 24h)")
    p.add_argument("--backup", action="store_true",
                   help="one-shot: back up the database in --dir, announce it, exit")
    p.add_argument("--backup-owner", default=None, help="the manifests' owner (default <node>-backup)")
    p.add_argument("--join", action="store_true",
                   help="a brand-new node: start from another node's snapshot under a join hold")
    p.add_argument("--peers", default=None,
                   help="with --join: the directory holding the other nodes' data directories")
    p.add_argument("--join-hold-ttl", default="10m", help="how long the join hold lives (default 10m)")
    for role in ("presence", "positions", "holds", "backups", "snapshots", "floors", "duty"):
        p.add_argument(f"--bucket-{role}", default=f"crewlet_{role}", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if not a.node or not NODE_ID.match(a.node):
        p.error("--node is required and follows the node id rule")
    if not a.stream or not STREAM_NAME.match(a.stream):
        p.error("--stream is required (a JetStream stream name)")
    if not a.dir:
        p.error("--dir is required")
    if a.join and not a.peers:
        a.peers = os.path.dirname(os.path.abspath(a.dir))
    for flag in ("snapshot_every", "backup_every", "join_hold_ttl"):
        v = getattr(a, flag)
        if v:
            try:
                parse_duration(v)
            except ValueError as e:
                p.error(f"--{flag.replace('_', '-')}: {e}")
    return a


async def amain(argv: List[str]) -> int:
    args = parse_args(argv)
    node = Node(args)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, node.stop.set)
    try:
        if args.backup:
            if not os.path.exists(node.db_path):
                log("backup_failed", error=f"no database at {node.db_path}")
                return EXIT_FAILED
            await node.connect()
            await backup_once(node)
            return EXIT_OK
        return await node.run()
    except Stop:
        log("stopped", checkpoint=node.cp.seq, code=EXIT_OK)
        return EXIT_OK
    finally:
        await node.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(amain(sys.argv[1:])))
