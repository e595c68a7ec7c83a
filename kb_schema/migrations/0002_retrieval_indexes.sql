-- Knowledge base schema, version 2: indexes for retrieval, statistics and `mblast kb` queries.
--
-- Retrieval scans the numeric signature of states (see src/kb/retrieval.cpp) and then reads the
-- experiences of the nearest ones by state_id; `kb stats`, `kb show` and the constraint check
-- look rows up by action and target.

CREATE INDEX experiences_by_state ON experiences (state_id);
CREATE INDEX experiences_by_action_target ON experiences (action_id, target);
CREATE INDEX experiences_by_candidate ON experiences (candidate_id);
CREATE INDEX states_by_backend_op ON states (backend, op_class);
CREATE INDEX runs_by_candidate ON runs (candidate_id);
CREATE INDEX constraints_by_action ON constraints (action_id);
CREATE INDEX constraint_evidence_by_experience ON constraint_evidence (experience_id);
CREATE INDEX text_versions_by_subject ON text_versions (subject_kind, subject_id, field);
CREATE INDEX text_versions_by_parent ON text_versions (parent_id);
CREATE INDEX action_backends_by_backend ON action_backends (backend);
CREATE INDEX policy_stats_by_action ON policy_stats (action_id, target_family);
