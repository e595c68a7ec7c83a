-- Knowledge base schema, version 3: model-level experiences (issue 40, `mblast optimize-model`).
--
-- A model-level decision is about a whole model or one of its fusion groups, not about one
-- kernel's state x action: which group went through the kernel loop under which share of the
-- budget, whether its kernel verified and how much faster it got, and how the model did end to
-- end. One row per decision, immutable like kernel experiences; `mblast kb query --level model`
-- reads them. A table of its own keeps kernel retrieval (states, actions, policy statistics)
-- unchanged.

CREATE TABLE model_experiences (
  id            TEXT PRIMARY KEY,
  model         TEXT NOT NULL,                  -- the model problem's name
  target        TEXT NOT NULL,                  -- the target name
  target_family TEXT NOT NULL,                  -- backend:arch, as kernel statistics are kept
  decision      TEXT NOT NULL,                  -- group-loop | keep-generic | end-to-end
  group_name    TEXT NOT NULL DEFAULT '',       -- the fusion group ('' for end-to-end)
  op_class      TEXT NOT NULL DEFAULT '',       -- the group's op class ('model' for end-to-end)
  ops           TEXT NOT NULL DEFAULT '',       -- the ATen ops fused into the group, comma-separated
  share         REAL,                           -- the group's share of the model's group time
  evaluations   INTEGER NOT NULL DEFAULT 0,     -- loop evaluations spent on it
  correct       INTEGER NOT NULL CHECK (correct IN (0, 1)),
  speedup       REAL CHECK (speedup IS NULL OR speedup > 0),  -- group: after / before; end-to-end: over eager
  outcome       TEXT NOT NULL DEFAULT '',       -- one line, as the report says it
  created_at    TEXT NOT NULL
) STRICT;

CREATE INDEX model_experiences_by_family ON model_experiences (target_family, op_class);
CREATE TRIGGER model_experiences_immutable BEFORE UPDATE ON model_experiences
BEGIN
  SELECT RAISE(ABORT, 'model experiences are immutable');
END;
