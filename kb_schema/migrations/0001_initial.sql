-- Knowledge base schema, version 1: every table of the design (DESIGN.md "Knowledge base").
--
-- src/kb/schema.cpp applies this file inside one write transaction and then sets
-- PRAGMA user_version = 1 and the application id in that same transaction; a failure leaves
-- the file as it was. Never edit a migration that has shipped: add the next NNNN_name.sql.
--
-- Identity. Every row that can travel between KBs (export, import, merge) has a global TEXT
-- key: content hashes for what is defined by its content (candidates, build logs, problems,
-- constraints, text versions), random 128-bit ids for events (runs, states, experiences),
-- names for targets and actions. Merging two KBs is then a union by key.
--
-- Provenance. Every knowledge row points at a provenance row: 'seed' (curated by us, with a
-- source) or 'learned' (written by a run of mblast, with what produced it).
--
-- Nothing is overwritten: candidates, build logs, runs, states, experiences and text versions
-- are immutable (triggers below); the text of actions, states and constraints changes only by
-- adding rows to text_versions.

CREATE TABLE provenance (
  id     INTEGER PRIMARY KEY,
  kind   TEXT NOT NULL CHECK (kind IN ('seed', 'learned')),
  source TEXT NOT NULL,
  UNIQUE (kind, source)
) STRICT;

-- Hardware targets. arch is the target family ("sm_90", "adreno-a7xx", "rv64gcv_zvfh-vlen256");
-- statistics are kept per backend:arch.
CREATE TABLE targets (
  name          TEXT PRIMARY KEY,
  backend       TEXT NOT NULL,
  arch          TEXT NOT NULL,
  spec          TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(spec)),
  provenance_id INTEGER NOT NULL REFERENCES provenance (id),
  created_at    TEXT NOT NULL
) STRICT;

CREATE TABLE problems (
  id            TEXT PRIMARY KEY,  -- content hash of the canonical problem spec
  name          TEXT NOT NULL,
  op_class      TEXT NOT NULL DEFAULT '',
  spec          TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(spec)),
  provenance_id INTEGER NOT NULL REFERENCES provenance (id),
  created_at    TEXT NOT NULL
) STRICT;

-- Content-addressed: id = content_hash_hex(source).
CREATE TABLE candidates (
  id            TEXT PRIMARY KEY,
  backend       TEXT NOT NULL,
  problem_id    TEXT REFERENCES problems (id),
  source        TEXT NOT NULL,
  provenance_id INTEGER NOT NULL REFERENCES provenance (id),
  created_at    TEXT NOT NULL
) STRICT;

-- Content-addressed build logs (many runs of one candidate share one log).
CREATE TABLE build_logs (
  id   TEXT PRIMARY KEY,  -- content_hash_hex(text)
  text TEXT NOT NULL
) STRICT;

-- One evaluation of a candidate on a target (the result of `mblast eval`).
CREATE TABLE runs (
  id                 TEXT PRIMARY KEY,
  candidate_id       TEXT NOT NULL REFERENCES candidates (id),
  problem_id         TEXT REFERENCES problems (id),
  target             TEXT NOT NULL REFERENCES targets (name),
  correct            INTEGER NOT NULL CHECK (correct IN (0, 1)),
  failure_kind       TEXT,  -- protocol FailureKind name; NULL when correct
  median_s           REAL,
  spread_pct         REAL,
  bandwidth_fraction REAL,
  compute_fraction   REAL,
  build_log_id       TEXT REFERENCES build_logs (id),
  result             TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(result)),
  provenance_id      INTEGER NOT NULL REFERENCES provenance (id),
  created_at         TEXT NOT NULL
) STRICT;

-- Performance states: the numeric signature (see include/mblast/kb/signature.h) plus text.
-- cluster is the discretised signature that keys policy_stats.
CREATE TABLE states (
  id                 TEXT PRIMARY KEY,
  target             TEXT REFERENCES targets (name),
  backend            TEXT NOT NULL,
  arch               TEXT NOT NULL DEFAULT '',
  op_class           TEXT NOT NULL DEFAULT '',
  log10_intensity    REAL,  -- log10(FLOPs per byte)
  bandwidth_fraction REAL CHECK (bandwidth_fraction IS NULL OR bandwidth_fraction >= 0),
  compute_fraction   REAL CHECK (compute_fraction IS NULL OR compute_fraction >= 0),
  utilisation        REAL CHECK (utilisation IS NULL OR utilisation >= 0),
  bottleneck         TEXT NOT NULL DEFAULT '',
  cluster            TEXT NOT NULL,
  problem_id         TEXT REFERENCES problems (id),
  candidate_id       TEXT REFERENCES candidates (id),
  run_id             TEXT REFERENCES runs (id),
  text               TEXT NOT NULL DEFAULT '',
  provenance_id      INTEGER NOT NULL REFERENCES provenance (id),
  created_at         TEXT NOT NULL
) STRICT;

-- Canonical techniques. The text columns hold the first version; later versions are rows of
-- text_versions (subject_kind 'action').
CREATE TABLE actions (
  id                TEXT PRIMARY KEY,  -- "cuda.wgmma-async-mma"
  title             TEXT NOT NULL,
  summary           TEXT NOT NULL DEFAULT '',
  when_helps        TEXT NOT NULL DEFAULT '',
  when_hurts        TEXT NOT NULL DEFAULT '',
  parameters        TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(parameters)),
  applies_to        TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(applies_to)),
  prior_log_speedup REAL,
  source            TEXT NOT NULL DEFAULT '',
  provenance_id     INTEGER NOT NULL REFERENCES provenance (id),
  created_at        TEXT NOT NULL
) STRICT;

CREATE TABLE action_backends (
  action_id TEXT NOT NULL REFERENCES actions (id),
  backend   TEXT NOT NULL,
  PRIMARY KEY (action_id, backend)
) STRICT;

-- state x action x problem x target -> outcome. log_speedup = ln(speedup) when correct.
CREATE TABLE experiences (
  id                  TEXT PRIMARY KEY,
  state_id            TEXT NOT NULL REFERENCES states (id),
  action_id           TEXT NOT NULL REFERENCES actions (id),
  problem_id          TEXT REFERENCES problems (id),
  target              TEXT NOT NULL REFERENCES targets (name),
  parent_candidate_id TEXT REFERENCES candidates (id),
  candidate_id        TEXT REFERENCES candidates (id),
  run_id              TEXT REFERENCES runs (id),
  after_state_id      TEXT REFERENCES states (id),
  correct             INTEGER NOT NULL CHECK (correct IN (0, 1)),
  failure_kind        TEXT,
  speedup             REAL CHECK (speedup IS NULL OR speedup > 0),
  log_speedup         REAL CHECK (log_speedup IS NULL OR (correct = 1 AND speedup IS NOT NULL)),
  critic_text         TEXT NOT NULL DEFAULT '',
  model               TEXT NOT NULL DEFAULT '',
  prompt_hash         TEXT NOT NULL DEFAULT '',
  provenance_id       INTEGER NOT NULL REFERENCES provenance (id),
  created_at          TEXT NOT NULL
) STRICT;

-- What made an action fail where. id = content hash of (action, predicate, effect), so the same
-- constraint learned twice, or in two KBs, is one row; each sighting is a constraint_evidence row.
CREATE TABLE constraints (
  id            TEXT PRIMARY KEY,
  action_id     TEXT REFERENCES actions (id),
  backend       TEXT NOT NULL,
  text          TEXT NOT NULL,
  predicate     TEXT NOT NULL CHECK (json_valid(predicate)),
  effect        TEXT NOT NULL CHECK (effect IN ('exclude', 'demote')),
  provenance_id INTEGER NOT NULL REFERENCES provenance (id),
  created_at    TEXT NOT NULL
) STRICT;

CREATE TABLE constraint_evidence (
  constraint_id TEXT NOT NULL REFERENCES constraints (id),
  experience_id TEXT NOT NULL REFERENCES experiences (id),
  PRIMARY KEY (constraint_id, experience_id)
) STRICT;

-- Versioned text edits (the critic's, a person's, a newer seed's). id = content hash of
-- (subject, field, parent, body). Two edits of one parent are both kept (a conflict, shown by
-- `mblast kb show`); the current text is the newest head.
CREATE TABLE text_versions (
  id            TEXT PRIMARY KEY,
  subject_kind  TEXT NOT NULL CHECK (subject_kind IN ('action', 'state', 'constraint')),
  subject_id    TEXT NOT NULL,
  field         TEXT NOT NULL,
  parent_id     TEXT REFERENCES text_versions (id),
  version       INTEGER NOT NULL CHECK (version >= 1),
  body          TEXT NOT NULL,
  author        TEXT NOT NULL DEFAULT '',
  provenance_id INTEGER NOT NULL REFERENCES provenance (id),
  created_at    TEXT NOT NULL
) STRICT;

-- Policy statistics per (state cluster, action, target family = backend:arch). Derived from
-- experiences by the trigger below, so every writer keeps them consistent and a merge, which
-- inserts only experiences the KB lacks, never counts one twice. A win is a correct try at
-- least 2 % faster than its parent (speedup > 1.02).
CREATE TABLE policy_stats (
  cluster            TEXT NOT NULL,
  action_id          TEXT NOT NULL REFERENCES actions (id),
  target_family      TEXT NOT NULL,
  tries              INTEGER NOT NULL,
  correct            INTEGER NOT NULL,
  wins               INTEGER NOT NULL,
  sum_log_speedup    REAL NOT NULL,  -- over correct tries with a speedup
  sum_sq_log_speedup REAL NOT NULL,
  best_speedup       REAL,
  PRIMARY KEY (cluster, action_id, target_family)
) STRICT;

CREATE TRIGGER experiences_count_in_policy_stats AFTER INSERT ON experiences
BEGIN
  INSERT INTO policy_stats (cluster, action_id, target_family, tries, correct, wins,
                            sum_log_speedup, sum_sq_log_speedup, best_speedup)
  SELECT s.cluster, NEW.action_id, t.backend || ':' || t.arch, 1, NEW.correct,
         CASE WHEN NEW.correct = 1 AND NEW.speedup > 1.02 THEN 1 ELSE 0 END,
         coalesce(NEW.log_speedup, 0.0), coalesce(NEW.log_speedup * NEW.log_speedup, 0.0),
         CASE WHEN NEW.correct = 1 THEN NEW.speedup END
  FROM states AS s, targets AS t
  WHERE s.id = NEW.state_id AND t.name = NEW.target
  ON CONFLICT (cluster, action_id, target_family) DO UPDATE SET
    tries = tries + 1,
    correct = correct + excluded.correct,
    wins = wins + excluded.wins,
    sum_log_speedup = sum_log_speedup + excluded.sum_log_speedup,
    sum_sq_log_speedup = sum_sq_log_speedup + excluded.sum_sq_log_speedup,
    best_speedup = CASE
      WHEN excluded.best_speedup IS NULL THEN best_speedup
      WHEN best_speedup IS NULL OR excluded.best_speedup > best_speedup THEN excluded.best_speedup
      ELSE best_speedup END;
END;

-- Immutability: what was measured or written stays as it was.
CREATE TRIGGER candidates_are_immutable BEFORE UPDATE ON candidates
BEGIN SELECT RAISE(ABORT, 'candidates are immutable (content-addressed)'); END;
CREATE TRIGGER build_logs_are_immutable BEFORE UPDATE ON build_logs
BEGIN SELECT RAISE(ABORT, 'build logs are immutable (content-addressed)'); END;
CREATE TRIGGER runs_are_immutable BEFORE UPDATE ON runs
BEGIN SELECT RAISE(ABORT, 'runs are immutable'); END;
CREATE TRIGGER states_are_immutable BEFORE UPDATE ON states
BEGIN SELECT RAISE(ABORT, 'states are immutable; add a text version to change their text'); END;
CREATE TRIGGER experiences_are_immutable BEFORE UPDATE ON experiences
BEGIN SELECT RAISE(ABORT, 'experiences are immutable'); END;
CREATE TRIGGER text_versions_are_immutable BEFORE UPDATE ON text_versions
BEGIN SELECT RAISE(ABORT, 'text versions are immutable; add a new version'); END;
CREATE TRIGGER action_text_is_versioned
BEFORE UPDATE OF title, summary, when_helps, when_hurts ON actions
BEGIN SELECT RAISE(ABORT, 'action text is versioned; add a text version instead'); END;
CREATE TRIGGER constraint_text_is_versioned BEFORE UPDATE OF text, predicate, effect ON constraints
BEGIN SELECT RAISE(ABORT, 'constraints are content-addressed; add a text version instead'); END;
CREATE TRIGGER experiences_are_never_deleted BEFORE DELETE ON experiences
BEGIN SELECT RAISE(ABORT, 'experiences are never deleted'); END;
CREATE TRIGGER text_versions_are_never_deleted BEFORE DELETE ON text_versions
BEGIN SELECT RAISE(ABORT, 'text versions are never deleted'); END;
