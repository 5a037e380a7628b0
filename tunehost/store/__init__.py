"""The results store: every measurement tunehost makes, in one local SQLite database (docs/history.md).

:mod:`tunehost.store.repository` is the database (schema, migrations, reads and writes, durability);
:mod:`tunehost.store.records` turns results into stored runs and runs back into what advise and doctor read.
"""

from tunehost.store.records import (DOCTOR_SAMPLE_RUNS, Measured, bench_run, calibration_points, doctor_sample,  # noqa: F401
                                    host_calibration, measured_on_host, results_of, rounds_of_watch,
                                    rounds_ts, runs_on_host, server_run)
from tunehost.store.repository import (BUSY_TIMEOUT_S, DB_NAME, ROUNDS_TABLE, SCHEMA_VERSION,  # noqa: F401
                                       STATE_ENV, NewRun, Store, StoredResult, StoredRound, StoredRun,
                                       StoreUnavailable, config_key, model_hash, open_for_recording, open_store,
                                       store_dir, store_path)
