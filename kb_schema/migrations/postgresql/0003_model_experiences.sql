-- Knowledge base schema, version 3, PostgreSQL: model-level experiences. The same table as
-- ../0003_model_experiences.sql (read that file for what each column means), in PostgreSQL types.

CREATE TABLE model_experiences (
  id            TEXT COLLATE "C" PRIMARY KEY,
  model         TEXT COLLATE "C" NOT NULL,
  target        TEXT COLLATE "C" NOT NULL,
  target_family TEXT COLLATE "C" NOT NULL,
  decision      TEXT COLLATE "C" NOT NULL,
  group_name    TEXT COLLATE "C" NOT NULL DEFAULT '',
  op_class      TEXT COLLATE "C" NOT NULL DEFAULT '',
  ops           TEXT COLLATE "C" NOT NULL DEFAULT '',
  share         DOUBLE PRECISION,
  evaluations   BIGINT NOT NULL DEFAULT 0,
  correct       BIGINT NOT NULL CHECK (correct IN (0, 1)),
  speedup       DOUBLE PRECISION CHECK (speedup IS NULL OR speedup > 0),
  outcome       TEXT COLLATE "C" NOT NULL DEFAULT '',
  created_at    TEXT COLLATE "C" NOT NULL
);

CREATE INDEX model_experiences_by_family ON model_experiences (target_family, op_class);
CREATE TRIGGER model_experiences_immutable BEFORE UPDATE ON model_experiences
FOR EACH ROW EXECUTE FUNCTION mblast_refuse('model experiences are immutable');
