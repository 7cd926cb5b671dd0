//! The tests that assert a timing or load the CPUs on purpose, by theme as beside this
//! module. Each takes [`crate::support::alone`], so nothing runs beside it.
//!
//! They live here so that their names sort first: libtest starts tests in the order of their
//! names, so these run one after another at the start, and the rest then run side by side.
//! Mixed in among the others, each one waiting for its turn would hold a test thread that
//! could run others. `every_test_takes_a_guard` checks that a test here takes `alone` and one
//! elsewhere `shared`.

mod cli;
mod dashboard;
mod datasets;
mod e2e;
mod faults;
mod metrics;
mod nodes;
mod open_loop;
mod placement;
mod preflight;
mod sweeps;
mod tls;
mod traces;
mod verdicts;
mod workloads;
