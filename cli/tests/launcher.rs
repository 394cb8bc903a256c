//! A process that a launcher (mpirun, srun) started as one of several ranks either joins them
//! (a build with the `mpi` feature, see `train_mpi.rs`) or stops with a clear error: it never
//! trains alone as if it were the whole run.

mod common;
use common::*;

#[test]
fn a_multi_rank_launch_without_its_ranks_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    for (var, val) in [("OMPI_COMM_WORLD_SIZE", "2"), ("PMI_SIZE", "3"), ("SLURM_STEP_NUM_TASKS", "4")] {
        let o = bc()
            .env(var, val)
            .args(["train", "--preset", "quick", "--max-steps", "2", "--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let (so, se) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{var}: {so}{se}");
        #[cfg(not(feature = "mpi"))]
        assert!(se.contains(&format!("({var}={val})")) && se.contains("without the `mpi` feature"), "{var}: {se}");
        #[cfg(feature = "mpi")]
        assert!(se.contains(var), "{var}: {se}");
        assert!(!out.exists(), "{var}: wrote {}", out.display());
    }
}
