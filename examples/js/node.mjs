#!/usr/bin/env node
// A reference crewlet node in JavaScript, with the official `nats` package
// (nats.js v2) and no native module: its "database" is one JSON file,
// rewritten whole and put in place with an atomic rename (write, fsync,
// rename, fsync the directory). docs/examples.md describes it; the Python
// node beside it (examples/python/node.py) is the fuller one (joiner,
// one-shot backups).
//
// What it does, per docs/contract.md:
// - presence: `crewlet_presence` key <node>, every third of the TTL (the
//   `_contract` row's presence_ttl, or the bucket's own max_age), roles
//   ["data"], started_at = when this process started;
// - positions: `crewlet_positions` key <stream>.<node>, the seven fields,
//   written only after the file holding the records and the checkpoint has
//   been renamed into place (the commit);
// - gate records (the domain's gate_subject) are skipped, their sequence
//   still counted as applied;
// - snapshots: every snapshot interval the file is copied, read back, and
//   registered in `crewlet_snapshots` (compare-and-set on the node's row);
// - backups: with --backup-every, a copy read back and announced in
//   `crewlet_backups` with verified: true and completed_at;
// - divergence: when the log no longer holds what follows its checkpoint it
//   reports status "log_diverged" and exits 3.
//
//   NODE_PATH=.tools/natsjs/node_modules node examples/js/node.mjs \
//     --server nats://127.0.0.1:4222 --node js-1 --stream CREWLET_TRACKER_LOG --dir /var/lib/js-1

import { createRequire } from "node:module";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

// ES modules do not search NODE_PATH; require does.
const require = createRequire(import.meta.url);
const { connect, DeliverPolicy } = require("nats");

const VERSION = "example-js/1";
const EXIT_DIVERGED = 3;
const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const INSTANT = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|\+00:00)$/;

// ---------------------------------------------------------------------------
// Helpers

function nowRfc3339() {
  // Date has milliseconds; the schemas take any number of fractional digits.
  return new Date().toISOString();
}

const UNITS = {
  ns: 1e-9, us: 1e-6, ms: 1e-3, msec: 1e-3,
  s: 1, sec: 1, secs: 1, second: 1, seconds: 1,
  m: 60, min: 60, mins: 60, minute: 60, minutes: 60,
  h: 3600, hr: 3600, hrs: 3600, hour: 3600, hours: 3600,
  d: 86400, day: 86400, days: 86400,
  w: 604800, week: 604800, weeks: 604800,
};

/** Seconds in a humantime duration ("30s", "100ms", "7d", "1h 30m"). */
function parseDuration(text) {
  if (typeof text !== "string" || !text.trim()) throw new Error(`not a duration: ${text}`);
  const re = /\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*/y;
  let total = 0;
  const s = text.trim();
  re.lastIndex = 0;
  while (re.lastIndex < s.length) {
    const m = re.exec(s);
    if (!m || !(m[2] in UNITS)) throw new Error(`not a duration: ${text}`);
    total += Number(m[1]) * UNITS[m[2]];
  }
  return total;
}

function log(event, fields = {}) {
  process.stderr.write(JSON.stringify({ at: nowRfc3339(), event, ...fields }) + "\n");
}

function digest(subject, data) {
  return createHash("sha256").update(subject).update("\0").update(data).digest("hex");
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function check(kind, row) {
  // The schemas' required fields (docs/schemas/): a malformed row would
  // block the trim for the whole fleet.
  const instant = (k) => {
    if (typeof row[k] !== "string" || !INSTANT.test(row[k])) throw new Error(`${kind}: ${k} is not an instant`);
  };
  const id = (k) => {
    if (typeof row[k] !== "string" || !NODE_ID.test(row[k])) throw new Error(`${kind}: ${k} breaks the node id rule`);
  };
  const seq = (v, k) => {
    if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${kind}: ${k} is not a sequence`);
  };
  if (kind === "presence") { id("node"); instant("started_at"); }
  if (kind === "position") {
    id("node"); seq(row.seq, "seq"); seq(row.generation, "generation");
    instant("stream_created"); instant("updated_at");
    if (!["ok", "log_diverged"].includes(row.status)) throw new Error("position: status");
  }
  if (kind === "snapshot") {
    id("node"); instant("updated_at");
    if (typeof row.skip_reason !== "string") throw new Error("snapshot: skip_reason");
    for (const a of Object.values(row.artefacts ?? {})) {
      seq(a.position, "position"); seq(a.generation, "generation");
      if (typeof a.verified !== "boolean" || !INSTANT.test(a.taken_at)) throw new Error("snapshot: artefact");
    }
  }
  if (kind === "backup") {
    id("id"); id("node"); instant("taken_at"); instant("completed_at");
    for (const [k, v] of Object.entries(row.positions)) seq(v, `positions[${k}]`);
  }
  return JSON.stringify(row);
}

// ---------------------------------------------------------------------------
// The store: records and checkpoint in one file, committed by rename

class Store {
  constructor(dir, stream) {
    this.dir = dir;
    this.stream = stream;
    this.file = path.join(dir, "state.json");
    fs.mkdirSync(dir, { recursive: true });
    if (fs.existsSync(this.file)) {
      this.state = JSON.parse(fs.readFileSync(this.file, "utf8"));
    } else {
      this.state = { stream, checkpoint: { seq: 0, stream_created: "", generation: 0, digest: "" }, records: [] };
    }
  }

  get checkpoint() { return this.state.checkpoint; }

  /** Applies [seq, subject, data, isGate] records and moves the checkpoint;
   * returns once the new file is in place (the commit). */
  apply(records) {
    const next = { ...this.state, checkpoint: { ...this.state.checkpoint }, records: this.state.records };
    const added = [];
    for (const [seq, subject, data, isGate] of records) {
      if (!isGate) added.push([seq, subject, Buffer.from(data).toString("base64")]);
      next.checkpoint.seq = seq;
      next.checkpoint.digest = digest(subject, data);
    }
    next.records = this.state.records.concat(added);
    this.write(next);
    this.state = next;
  }

  setIncarnation(streamCreated, generation) {
    const next = { ...this.state, checkpoint: { ...this.state.checkpoint, stream_created: streamCreated, generation } };
    this.write(next);
    this.state = next;
  }

  write(state) {
    const tmp = this.file + ".tmp";
    const fd = fs.openSync(tmp, "w");
    try {
      fs.writeSync(fd, JSON.stringify(state));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.file);
    const dfd = fs.openSync(this.dir, "r");
    try { fs.fsyncSync(dfd); } finally { fs.closeSync(dfd); }
  }

  /** Copies the committed file to `dest` and reads the copy back. */
  copyVerified(dest) {
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.copyFileSync(this.file, dest + ".tmp");
    const copy = JSON.parse(fs.readFileSync(dest + ".tmp", "utf8"));
    const cp = copy.checkpoint;
    if (copy.stream !== this.stream || !Number.isSafeInteger(cp.seq)) throw new Error(`${dest}: not a copy of ${this.stream}`);
    const top = copy.records.length ? copy.records[copy.records.length - 1][0] : 0;
    if (top > cp.seq) throw new Error(`${dest}: a record at ${top} past the checkpoint ${cp.seq}`);
    fs.renameSync(dest + ".tmp", dest);
    return { seq: cp.seq, generation: cp.generation, records: copy.records.length };
  }
}

// ---------------------------------------------------------------------------
// The node

class Diverged extends Error {}

function parseArgs(argv) {
  const a = {
    server: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
    node: process.env.CREWLET_NODE, stream: process.env.CREWLET_STREAM, dir: process.env.CREWLET_NODE_DIR,
    gateSubject: process.env.CREWLET_GATE_SUBJECT ?? null, snapshotEvery: null, backupEvery: null,
  };
  const flags = { "--server": "server", "--node": "node", "--stream": "stream", "--dir": "dir",
    "--gate-subject": "gateSubject", "--snapshot-every": "snapshotEvery", "--backup-every": "backupEvery" };
  for (let i = 0; i < argv.length; i++) {
    const k = flags[argv[i]];
    if (!k || i + 1 >= argv.length) { console.error(`unknown or incomplete flag ${argv[i]}`); process.exit(2); }
    a[k] = argv[++i];
  }
  if (!a.node || !NODE_ID.test(a.node) || !a.stream || !a.dir) {
    console.error("usage: node.mjs --node ID --stream STREAM --dir DIR [--server URL] [--gate-subject S] [--snapshot-every D] [--backup-every D]");
    process.exit(2);
  }
  for (const k of ["snapshotEvery", "backupEvery"]) if (a[k]) parseDuration(a[k]);
  return a;
}

class Node {
  constructor(args) {
    this.args = args;
    this.id = args.node;
    this.stream = args.stream;
    this.startedAt = nowRfc3339();
    this.stopping = false;
    this.settings = {
      gateSubject: args.gateSubject, presenceTtl: null, bucketTtl: null, generation: null,
      floorsGeneration: null, snapshotInterval: args.snapshotEvery ? parseDuration(args.snapshotEvery) : null,
    };
    this.reported = -1;
    this.diverged = false;
  }

  get generation() {
    return this.settings.generation ?? this.settings.floorsGeneration ?? 0;
  }

  get leaseEveryMs() {
    const ttls = [this.settings.presenceTtl, this.settings.bucketTtl].filter((t) => t);
    return ttls.length ? Math.max(100, (Math.min(...ttls) * 1000) / 3) : 10_000;
  }

  async wait(ms) {
    const until = Date.now() + ms;
    while (!this.stopping && Date.now() < until) await sleep(Math.min(100, until - Date.now()));
    return this.stopping;
  }

  async connect() {
    for (;;) {
      try {
        this.nc = await connect({ servers: this.args.server.split(","), name: `crewlet-example/${this.id}`,
          maxReconnectAttempts: -1, reconnectTimeWait: 500 });
        break;
      } catch (e) {
        log("waiting_for_broker", { error: String(e) });
        if (await this.wait(1000)) throw new Error("stopped");
      }
    }
    this.js = this.nc.jetstream({ timeout: 5000 });
    this.kv = {};
    for (const role of ["presence", "positions", "backups", "snapshots", "floors"]) {
      // Open, never create: `crewlet retention init` makes the buckets
      // with their settings (the presence bucket's TTL above all).
      for (;;) {
        try {
          this.kv[role] = await this.js.views.kv(`crewlet_${role}`, { bindOnly: true });
          break;
        } catch (e) {
          log("waiting_for_bucket", { bucket: `crewlet_${role}`, error: String(e), remedy: "crewlet retention init" });
          if (await this.wait(1000)) throw new Error("stopped");
        }
      }
    }
  }

  /** Raw stream info: `created` exactly as the broker wrote it. */
  async streamInfo() {
    const m = await this.nc.request(`$JS.API.STREAM.INFO.${this.stream}`, new Uint8Array(0), { timeout: 5000 });
    const info = JSON.parse(new TextDecoder().decode(m.data));
    if (info.error) throw new Error(`stream info: ${info.error.description}`);
    return info;
  }

  async getJson(role, key) {
    const e = await this.kv[role].get(key);
    if (!e || e.operation !== "PUT" || e.value.length === 0) return [null, e ? e.revision : 0];
    return [e.json(), e.revision];
  }

  async refreshSettings() {
    const s = this.settings;
    const [contract] = await this.getJson("floors", "_contract");
    if (contract) {
      try { s.presenceTtl = parseDuration(contract.presence_ttl); } catch { /* keep */ }
      for (const d of contract.domains ?? []) {
        if (d.stream !== this.stream) continue;
        if ("gate_subject" in d) s.gateSubject = d.gate_subject;
        if (Number.isSafeInteger(d.generation)) s.generation = d.generation;
        if (d.snapshots && typeof d.snapshots === "object") {
          try { s.snapshotInterval = parseDuration(d.snapshots.interval); } catch { /* keep */ }
        }
      }
    }
    const [floors] = await this.getJson("floors", this.stream);
    if (floors && Number.isSafeInteger(floors.generation)) s.floorsGeneration = floors.generation;
    const st = await this.kv.presence.status();
    s.bucketTtl = st.ttl ? st.ttl / 1000 : null;
  }

  async lease() {
    const row = { node: this.id, roles: ["data"], version: VERSION, started_at: this.startedAt };
    await this.kv.presence.put(this.id, check("presence", row));
  }

  async report(status = "ok") {
    const cp = this.store.checkpoint;
    const row = { node: this.id, stream: this.stream, seq: cp.seq, generation: cp.generation,
      stream_created: cp.stream_created || this.streamCreated, updated_at: nowRfc3339(), status };
    await this.kv.positions.put(`${this.stream}.${this.id}`, check("position", row));
    this.reported = cp.seq;
  }

  async registerSnapshot(artefact, skip) {
    // One row per node for every stream: compare-and-set keeps the others.
    for (let i = 0; i < 5; i++) {
      const [row, rev] = await this.getJson("snapshots", this.id);
      const artefacts = { ...(row?.artefacts ?? {}) };
      if (artefact) artefacts[this.stream] = artefact; else delete artefacts[this.stream];
      const body = check("snapshot", { node: this.id, updated_at: nowRfc3339(), skip_reason: skip, artefacts });
      try {
        if (rev) await this.kv.snapshots.update(this.id, body, rev);
        else await this.kv.snapshots.create(this.id, body);
        return;
      } catch (e) {
        if (!/wrong last sequence|exists/i.test(String(e))) throw e;
      }
    }
    throw new Error("the snapshot row kept changing under this node");
  }

  async checkAgainstLog(info) {
    const cp = this.store.checkpoint;
    const { first_seq: first, last_seq: last } = info.state;
    if (cp.stream_created && cp.stream_created !== info.created) throw new Diverged(`the stream was recreated (created ${info.created})`);
    if (cp.seq > last) throw new Diverged(`the checkpoint ${cp.seq} is past the log's last sequence ${last}`);
    if (first > cp.seq + 1) throw new Diverged(`the log starts at ${first}; this node needs ${cp.seq + 1} on`);
  }

  async adoptGeneration() {
    const cp = this.store.checkpoint;
    if (cp.stream_created === this.streamCreated && cp.generation === this.generation) return;
    if (cp.seq > 0 && cp.generation !== this.generation) await this.checkAgainstLog(await this.streamInfo());
    this.store.setIncarnation(this.streamCreated, this.generation);
  }

  async applyLoop() {
    let expected = this.store.checkpoint.seq + 1;
    // An ordered consumer: the client recreates it after a lost delivery,
    // so a gap in stream sequences is records that are gone.
    const consumer = await this.js.consumers.get(this.stream, {
      deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: expected });
    while (!this.stopping) {
      const msgs = await consumer.fetch({ max_messages: 256, expires: 1000 });
      const batch = [];
      for await (const m of msgs) {
        if (m.seq < expected) continue;
        if (m.seq > expected) {
          const info = await this.streamInfo();
          if (info.state.first_seq > expected) throw new Diverged(`records ${expected}..${info.state.first_seq - 1} are gone from the log`);
          log("records_erased", { first: expected, last: m.seq - 1 });
        }
        const isGate = this.settings.gateSubject != null && m.subject === this.settings.gateSubject;
        batch.push([m.seq, m.subject, m.data, isGate]);
        expected = m.seq + 1;
      }
      if (batch.length) {
        this.store.apply(batch);
        // After the commit, never before.
        try { await this.report(); } catch (e) { log("report_failed", { error: String(e) }); }
      }
    }
  }

  async presenceLoop() {
    while (!this.stopping) {
      try { await this.lease(); } catch (e) { log("lease_failed", { error: String(e) }); }
      if (await this.wait(this.leaseEveryMs)) return;
    }
  }

  async settingsLoop() {
    while (!(await this.wait(1000))) {
      try {
        await this.refreshSettings();
        const info = await this.streamInfo();
        if (info.created !== this.streamCreated) throw new Diverged(`the stream was recreated (created ${info.created})`);
        if (this.generation !== this.store.checkpoint.generation) { await this.adoptGeneration(); await this.report(); }
        else if (this.reported < this.store.checkpoint.seq) await this.report();
      } catch (e) {
        if (e instanceof Diverged) throw e;
        log("settings_refresh_failed", { error: String(e) });
      }
    }
  }

  async snapshotLoop() {
    let last = Date.now();
    while (!(await this.wait(100))) {
      const every = this.settings.snapshotInterval;
      if (!every || Date.now() - last < every * 1000) continue;
      last = Date.now();
      const cp = this.store.checkpoint;
      if (cp.seq === 0 || this.diverged) continue;
      try {
        const takenAt = nowRfc3339();
        const dir = path.join(this.args.dir, "snapshots");
        const got = this.store.copyVerified(path.join(dir, `${this.stream}.${cp.seq}.json`));
        await this.registerSnapshot({ position: got.seq, generation: got.generation, taken_at: takenAt, verified: true }, "");
        const files = fs.readdirSync(dir).filter((f) => f.endsWith(".json"))
          .sort((x, y) => Number(y.split(".").at(-2)) - Number(x.split(".").at(-2)));
        for (const f of files.slice(2)) fs.unlinkSync(path.join(dir, f));
      } catch (e) {
        log("snapshot_failed", { error: String(e) });
      }
    }
  }

  async backupLoop() {
    if (!this.args.backupEvery) return;
    const every = parseDuration(this.args.backupEvery) * 1000;
    // This node's manifests, oldest first, from earlier runs too: old ones
    // may go once newer ones count.
    const mine = [];
    try {
      const keys = [];
      for await (const key of await this.kv.backups.keys(`${this.id}.>`)) keys.push(key);
      for (const key of keys) {
        const [row] = await this.getJson("backups", key);
        if (row?.node === this.id && row.completed_at) {
          mine.push([row.completed_at, key]);
        }
      }
      mine.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
    } catch (e) {
      log("backup_list_failed", { error: String(e) });
    }
    while (!(await this.wait(every))) {
      if (this.store.checkpoint.seq === 0 || this.diverged) continue;
      try {
        const takenAt = nowRfc3339();
        const id = "b" + takenAt.replace(/[^0-9]/g, "").slice(0, 17);
        const got = this.store.copyVerified(path.join(this.args.dir, "backups", `${id}.json`));
        const manifest = { id, node: this.id, taken_at: takenAt, completed_at: nowRfc3339(), verified: true,
          owner: `${this.id}-backup`, positions: { [this.stream]: got.seq } };
        const key = `${this.id}.${id}`;
        await this.kv.backups.put(key, check("backup", manifest));
        log("backup_announced", { id, position: got.seq });
        mine.push([manifest.completed_at, key]);
        while (mine.length > 2) {
          const [, old] = mine.shift();
          await this.kv.backups.delete(old).catch(() => {});
        }
        // The files: the two newest (a copy whose manifest a kill cut off goes too).
        const dir = path.join(this.args.dir, "backups");
        const files = fs.readdirSync(dir).filter((f) => /^b[0-9]+\.json$/.test(f)).sort();
        for (const f of files.slice(0, -2)) fs.rmSync(path.join(dir, f), { force: true });
      } catch (e) {
        log("backup_failed", { error: String(e) });
      }
    }
  }

  async diverge(why) {
    this.diverged = true;
    log("log_diverged", { reason: why, checkpoint: this.store.checkpoint.seq,
      remedy: `rebuild this node, or evict it (crewlet retention evict ${this.id} -confirm ${this.id})` });
    try {
      await this.report("log_diverged");
      await this.registerSnapshot(null, "log_diverged");
    } catch (e) { log("report_failed", { error: String(e) }); }
  }

  async run() {
    await this.connect();
    await this.refreshSettings();
    let info;
    for (;;) {
      try { info = await this.streamInfo(); break; } catch (e) { log("waiting_for_stream", { error: String(e) }); }
      if (await this.wait(1000)) return 0;
    }
    this.streamCreated = info.created;
    this.store = new Store(this.args.dir, this.stream);
    log("starting", { node: this.id, stream: this.stream, checkpoint: this.store.checkpoint.seq,
      first_seq: info.state.first_seq, last_seq: info.state.last_seq, generation: this.generation });
    let code = 0;
    const cp = this.store.checkpoint;
    if (cp.seq === 0 && !cp.stream_created && info.state.first_seq > 1) {
      // A node that never held anything has nothing to diverge from:
      // writing a row now would pin the log at 0. This example has no
      // joiner (examples/python/node.py --join has one).
      log("unhydrated", { reason: `the log starts at ${info.state.first_seq}`, code: 2 });
      await this.nc.drain().catch(() => {});
      return 2;
    }
    try {
      await this.checkAgainstLog(info);
      await this.adoptGeneration();
      await this.report(); // the position first, then the lease
      const loops = [this.presenceLoop(), this.settingsLoop(), this.snapshotLoop(), this.backupLoop(), this.applyLoop()];
      await Promise.all(loops); // the first loop to fail ends the node
    } catch (e) {
      if (e instanceof Diverged) { await this.diverge(e.message); code = EXIT_DIVERGED; }
      else if (!this.stopping) { log("failed", { error: String(e?.stack ?? e) }); code = 1; }
    }
    this.stopping = true;
    // A clean stop gives the lease up; the positions row stays and pins.
    await this.kv.presence.delete(this.id).catch(() => {});
    log("stopped", { checkpoint: this.store.checkpoint.seq, code });
    await this.nc.drain().catch(() => {});
    return code;
  }
}

const node = new Node(parseArgs(process.argv.slice(2)));
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => { node.stopping = true; });
node.run().then((code) => process.exit(code), (e) => { log("failed", { error: String(e?.stack ?? e) }); process.exit(1); });
