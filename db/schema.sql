-- schema.sql -- the ktune store, schema version 2 (PRAGMA user_version = 2).
--
-- Embedded in the binary (build/schema_sql.h, kt_schema_sql) and applied by
-- store_open() to an empty file inside one transaction. A later version adds
-- a migration step in db/store.c; this file always describes a new database.
-- Version 2 added the trials' measuring conditions, tournament and drift
-- columns (at the end of the table, where ALTER TABLE puts them), the
-- measurements table and the tournament-first ranking of the winners view.
--
-- Times are unix seconds as REAL (sub-second, so two sweeps started in the
-- same second stay distinct: `started` is part of a sweep's identity when
-- databases are merged). Timings are microseconds.

-- One row per GPU ever seen, keyed by its UUID (stable across hosts, which
-- is what lets `ktune merge` recognise the same device in two files).
CREATE TABLE devices (
	id INTEGER PRIMARY KEY,		-- local row id; differs between databases
	uuid TEXT NOT NULL UNIQUE,	-- "GPU-8f3c..." from the driver; the identity
	name TEXT NOT NULL,		-- "NVIDIA H200"
	arch TEXT NOT NULL,		-- "sm_90": the arch fallback in lookups
	sms INTEGER NOT NULL DEFAULT 0,	-- multiprocessor count
	l2_bytes INTEGER NOT NULL DEFAULT 0,	-- L2 cache size
	smem_optin INTEGER NOT NULL DEFAULT 0,	-- opt-in shared memory per block, bytes
	clock_mhz INTEGER NOT NULL DEFAULT 0,	-- SM clock the driver reports
	mem_clock_mhz INTEGER NOT NULL DEFAULT 0,	-- memory clock
	driver TEXT NOT NULL DEFAULT '',	-- driver version ("580.95")
	cuda TEXT NOT NULL DEFAULT '',	-- CUDA version the driver supports ("13.0")
	nvrtc TEXT NOT NULL DEFAULT '',	-- NVRTC version used to compile for it
	first_seen REAL NOT NULL,	-- when the row was created
	last_seen REAL NOT NULL		-- last store_device_upsert (fields refreshed then)
);

-- A problem is one family at one shape. The key is canonical text written by
-- kernels/ ("tokens=1024,in=4096,out=4096"); the JSON is the same shape as an
-- object, for readers that want numbers.
CREATE TABLE problems (
	id INTEGER PRIMARY KEY,		-- local row id
	family TEXT NOT NULL,		-- "blast", "dense", ...
	shape_key TEXT NOT NULL,	-- canonical shape text; identity with family
	shape_json TEXT NOT NULL,	-- {"tokens":1024,"in":4096,...}
	UNIQUE (family, shape_key)
);

-- A config is one point of a family's parameter space.
CREATE TABLE configs (
	id INTEGER PRIMARY KEY,		-- local row id
	family TEXT NOT NULL,		-- family the parameters belong to
	config_key TEXT NOT NULL,	-- canonical text (variant + parameters); identity with family
	params_json TEXT NOT NULL,	-- the parameters as a JSON object
	UNIQUE (family, config_key)
);

-- A sweep is one run of a strategy over one problem on one device. Its
-- identity across databases is (device uuid, problem, strategy, options_key,
-- started); within one database the newest sweep with the same (device,
-- problem, strategy, options_key) is the one a repeated command resumes.
CREATE TABLE sweeps (
	id INTEGER PRIMARY KEY,		-- local row id (the sweep id users see)
	device_id INTEGER NOT NULL REFERENCES devices(id),	-- where it ran
	problem_id INTEGER NOT NULL REFERENCES problems(id),	-- what it tuned
	strategy TEXT NOT NULL,		-- "exhaustive", "random", "halving", ...
	options_key TEXT NOT NULL,	-- canonical text of what changes the plan (budget, seed, space version)
	provenance_json TEXT NOT NULL DEFAULT '{}',	-- device, clocks, driver/CUDA/NVRTC/ktune versions, template hash
	status TEXT NOT NULL DEFAULT 'running'
		CHECK (status IN ('running', 'done', 'interrupted', 'failed')),	-- lifecycle
	planned INTEGER NOT NULL DEFAULT 0,	-- configs the plan will evaluate
	started REAL NOT NULL,		-- when the sweep was first begun (not reset on resume)
	finished REAL,			-- when it last ended; NULL while running
	owner_pid INTEGER NOT NULL DEFAULT 0,	-- process running (or last running) it
	owner_host TEXT NOT NULL DEFAULT '',	-- host of that process (liveness is checked only there)
	merged_from TEXT,		-- NULL when run here; else the database file it was merged from
	UNIQUE (device_id, problem_id, strategy, options_key, started)
);
CREATE INDEX sweeps_by_plan ON sweeps (device_id, problem_id, strategy, options_key);
CREATE INDEX sweeps_by_problem ON sweeps (problem_id);

-- One evaluated config of a sweep. Committed one by one as they land, so a
-- killed sweep loses at most the trial in flight; UNIQUE (sweep, config) is
-- what guarantees that a resumed sweep evaluates nothing twice.
CREATE TABLE trials (
	id INTEGER PRIMARY KEY,		-- local row id (insertion order)
	sweep_id INTEGER NOT NULL REFERENCES sweeps(id),	-- the sweep it belongs to
	config_id INTEGER NOT NULL REFERENCES configs(id),	-- what was evaluated
	status TEXT NOT NULL CHECK (status IN ('ok', 'wrong', 'compile_error',
		'launch_error', 'fault', 'timeout')),	-- outcome; only 'ok' can win
	median_us REAL,			-- median kernel time; NULL unless status = 'ok'
	min_us REAL,			-- fastest repetition; NULL unless 'ok'
	p90_us REAL,			-- 90th percentile; NULL unless 'ok'
	spread REAL,			-- relative spread of repetitions (noise); NULL unless 'ok'
	reps INTEGER NOT NULL DEFAULT 0,	-- timed repetitions
	rel_err REAL,			-- relative L2 error against the reference; NULL if not checked
	compile_ms REAL NOT NULL DEFAULT 0,	-- NVRTC time (0 when the binary came from the cache)
	binary_key TEXT,		-- binaries.key of the compiled program(s); no foreign key: the cache may be pruned
	message TEXT,			-- short error text (why wrong/fault/...)
	log TEXT,			-- NVRTC log for compile errors
	retime_us REAL,			-- the sweep winner timed again at the end of the run; NULL if never
	created REAL NOT NULL,		-- when the trial was recorded
	-- since version 2:
	tournament_us REAL,		-- median over the rounds of the sweep's last final tournament; NULL if not in one
	sm_mhz_before INTEGER,		-- SM clock (NVML) just before the timed repetitions; NULL when not read
	sm_mhz_after INTEGER,		-- SM clock just after them
	mem_mhz_before INTEGER,		-- memory clock before the timed repetitions
	mem_mhz_after INTEGER,		-- memory clock after them
	power_w_before REAL,		-- board power draw before them, watts
	power_w_after REAL,		-- board power draw after them, watts
	temp_c_before INTEGER,		-- GPU temperature before them, degrees C
	temp_c_after INTEGER,		-- GPU temperature after them, degrees C
	throttled INTEGER NOT NULL DEFAULT 0,	-- 1: timed at an SM clock under the sweep's threshold (the time reads slow)
	norm_us REAL,			-- median_us on the drift sentinel's footing (median x first sentinel / nearest sentinel); NULL without one
	errors_json TEXT,		-- verification per output buffer: {"y": {"rel_l2", "max_err", "over", "tol", "local_tol"}}
	UNIQUE (sweep_id, config_id)
);
CREATE INDEX trials_ok_by_time ON trials (status, median_us);
CREATE INDEX trials_by_config ON trials (config_id);

-- Re-timings that are not a config's first evaluation in its sweep: the
-- drift sentinel (a fixed reference re-timed at intervals), the rounds of the
-- final tournament, and the winner's re-time in a fresh worker process. One
-- invocation of a sweep (`run`) groups them: a resumed sweep holds a new
-- tournament, and the latest complete one is the sweep's.
CREATE TABLE measurements (
	id INTEGER PRIMARY KEY,		-- local row id (insertion order)
	sweep_id INTEGER NOT NULL REFERENCES sweeps(id),	-- the sweep it belongs to
	run REAL NOT NULL,		-- start time of the invocation that took it
	kind TEXT NOT NULL CHECK (kind IN ('sentinel', 'tournament', 'retime')),	-- what it is
	config_id INTEGER REFERENCES configs(id),	-- what was timed; NULL for a vendor baseline
	baseline TEXT,			-- the vendor baseline timed ("cublas_dense"), else NULL
	round INTEGER NOT NULL DEFAULT 0,	-- tournament round; sentinel: its sequence number
	position INTEGER NOT NULL DEFAULT 0,	-- place in the round's order; sentinel: trials recorded before it
	status TEXT NOT NULL CHECK (status IN ('ok', 'wrong', 'compile_error',
		'launch_error', 'fault', 'timeout')),	-- outcome, as for trials
	median_us REAL,			-- median time; NULL unless 'ok'
	min_us REAL,			-- fastest repetition; NULL unless 'ok'
	p90_us REAL,			-- 90th percentile; NULL unless 'ok'
	reps INTEGER NOT NULL DEFAULT 0,	-- timed repetitions
	sm_mhz_before INTEGER,		-- conditions, as for trials; NULL when not read
	sm_mhz_after INTEGER,
	power_w_after REAL,
	temp_c_after INTEGER,
	message TEXT,			-- why, when not 'ok'
	created REAL NOT NULL,		-- when it was recorded
	CHECK ((config_id IS NULL) <> (baseline IS NULL))	-- a config or a baseline, never both
);
CREATE INDEX measurements_by_sweep ON measurements (sweep_id, kind, run);

-- Compiled-binary cache: one CUBIN per content hash of (template text,
-- compile options, NVRTC version), so a changed input never hits.
CREATE TABLE binaries (
	key TEXT PRIMARY KEY,		-- content hash (32 hex digits, util/hash.h)
	arch TEXT NOT NULL,		-- "sm_90a" it was compiled for
	nvrtc_version TEXT NOT NULL,	-- NVRTC that compiled it
	cubin BLOB NOT NULL,		-- the CUBIN image
	log TEXT,			-- NVRTC log (warnings), may be NULL
	compile_ms REAL NOT NULL DEFAULT 0,	-- how long the compile took
	created REAL NOT NULL		-- when it was stored
);

-- Reference implementations timed beside the sweep: 'cublas_dense' (vendor
-- dense GEMM), 'naive' (the textbook kernel sequence), 'torch_*' imported.
CREATE TABLE baselines (
	id INTEGER PRIMARY KEY,		-- local row id
	device_id INTEGER NOT NULL REFERENCES devices(id),	-- where it was timed
	problem_id INTEGER NOT NULL REFERENCES problems(id),	-- the shape
	sweep_id INTEGER REFERENCES sweeps(id),	-- sweep that timed it; NULL if imported
	name TEXT NOT NULL,		-- "cublas_dense", "naive", ...
	median_us REAL NOT NULL,	-- its median time
	created REAL NOT NULL		-- when; the newest of a name is the one reported
);
CREATE INDEX baselines_lookup ON baselines (device_id, problem_id, name, created);

-- The best ok trial per (device, problem) over every sweep, with the newest
-- cuBLAS and naive baselines beside it. A trial that met others in a final
-- tournament ranks first, by its tournament median (a median of interleaved,
-- rotated rounds, so drift during a sweep cannot favour it); then the rest by
-- their sweep median. Ties go to the lower min, then to the earlier trial.
-- median_us is the figure it ranked by. A 'wrong' trial is never a winner.
CREATE VIEW winners AS
WITH ranked AS (
	SELECT t.id AS trial_id, t.sweep_id, t.config_id,
	       coalesce(t.tournament_us, t.median_us) AS median_us, t.min_us,
	       t.p90_us, t.retime_us, s.device_id, s.problem_id,
	       row_number() OVER (PARTITION BY s.device_id, s.problem_id
				  ORDER BY t.tournament_us IS NULL,
					   coalesce(t.tournament_us, t.median_us),
					   t.min_us, t.id) AS rank
	FROM trials t JOIN sweeps s ON s.id = t.sweep_id
	WHERE t.status = 'ok' AND t.median_us IS NOT NULL
)
SELECT r.device_id, r.problem_id, r.sweep_id, r.trial_id,
       d.name AS device_name, d.uuid AS device_uuid, d.arch,
       p.family, p.shape_key, p.shape_json,
       c.config_key, c.params_json,
       r.median_us, r.min_us, r.p90_us, r.retime_us,
       (SELECT b.median_us FROM baselines b
	WHERE b.device_id = r.device_id AND b.problem_id = r.problem_id
	  AND b.name = 'cublas_dense'
	ORDER BY b.created DESC, b.id DESC LIMIT 1) AS cublas_us,
       (SELECT b.median_us FROM baselines b
	WHERE b.device_id = r.device_id AND b.problem_id = r.problem_id
	  AND b.name = 'naive'
	ORDER BY b.created DESC, b.id DESC LIMIT 1) AS naive_us,
       s.provenance_json
FROM ranked r
JOIN devices d ON d.id = r.device_id
JOIN problems p ON p.id = r.problem_id
JOIN configs c ON c.id = r.config_id
JOIN sweeps s ON s.id = r.sweep_id
WHERE r.rank = 1;
