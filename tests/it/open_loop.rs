//! Open-loop load: the same seed gives the same schedule and inputs. The schedules followed
//! in time are in `alone::open_loop`.

use crate::support;

#[test]
fn same_seed_same_schedule_and_inputs() {
    let _shared = support::shared();
    let args = |seed: &str| {
        support::profile_args(&[
            "--request-rate",
            "50",
            "--request-count",
            "100",
            "--random-seed",
            seed,
            "--synthetic-input-tokens-mean",
            "40",
            "--synthetic-input-tokens-stddev",
            "10",
            "--output-tokens-mean",
            "20",
            "--output-tokens-stddev",
            "5",
            "--url",
            "127.0.0.1:9",
        ])
    };
    let a = args("7").plan().unwrap();
    let b = args("7").plan().unwrap();
    let c = args("8").plan().unwrap();
    assert_eq!(a.workload.inputs_json(), b.workload.inputs_json());
    assert_eq!(a.load.offsets, b.load.offsets);
    assert_ne!(a.workload.inputs_json(), c.workload.inputs_json());
    assert_ne!(a.load.offsets, c.load.offsets);
}
