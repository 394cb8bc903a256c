//! Which launcher started this process, and as one of how many ranks, read from the
//! environment variables launchers set for every rank they start.
//!
//! | launcher | size | rank | rank on this node |
//! |---|---|---|---|
//! | Open MPI `mpirun` / `mpiexec` | `OMPI_COMM_WORLD_SIZE` | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_LOCAL_RANK` |
//! | MPICH / Intel MPI (Hydra, PMI) | `PMI_SIZE` | `PMI_RANK` | `MPI_LOCALRANKID` |
//! | Slurm `srun` | `SLURM_STEP_NUM_TASKS` | `SLURM_PROCID` | `SLURM_LOCALID` |
//!
//! Slurm's `SLURM_NTASKS` counts only inside a job step (`SLURM_STEP_ID` set): a batch script
//! of `sbatch -n 4` that runs `bc-cli` without `srun` is one process, and is treated as one.

/// A launch of several ranks, as the environment describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The number of ranks.
    pub size: usize,
    /// This process's rank, when the launcher says.
    pub rank: Option<usize>,
    /// This process's rank among the ranks of its node (the GPU it should use).
    pub local_rank: Option<usize>,
    /// The variable the size was read from, for messages.
    pub var: &'static str,
}

/// The launch described by this process's environment (see the module documentation), or
/// `None` when no launcher variable is set.
pub fn detect_launch() -> Option<Launch> {
    detect_launch_from(|k| std::env::var(k).ok())
}

/// [`detect_launch`] over any variable lookup (for tests).
pub fn detect_launch_from(get: impl Fn(&str) -> Option<String>) -> Option<Launch> {
    let num = |k: &str| get(k).and_then(|v| v.trim().parse::<usize>().ok());
    let table: [(&'static str, &str, &str); 3] = [
        ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
        ("PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"),
        ("SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID"),
    ];
    for (size, rank, local) in table {
        if let Some(n) = num(size) {
            return Some(Launch { size: n, rank: num(rank), local_rank: num(local), var: size });
        }
    }
    if get("SLURM_STEP_ID").is_some() {
        if let Some(n) = num("SLURM_NTASKS") {
            return Some(Launch {
                size: n,
                rank: num("SLURM_PROCID"),
                local_rank: num("SLURM_LOCALID"),
                var: "SLURM_NTASKS",
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn open_mpi_pmi_and_srun_are_recognized() {
        let l = detect_launch_from(env(&[
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ]))
        .unwrap();
        assert_eq!(l, Launch { size: 2, rank: Some(1), local_rank: Some(1), var: "OMPI_COMM_WORLD_SIZE" });
        let l = detect_launch_from(env(&[("PMI_SIZE", "4"), ("PMI_RANK", "3")])).unwrap();
        assert_eq!((l.size, l.rank, l.var), (4, Some(3), "PMI_SIZE"));
        let l =
            detect_launch_from(env(&[("SLURM_STEP_NUM_TASKS", "8"), ("SLURM_PROCID", "5"), ("SLURM_LOCALID", "1")]))
                .unwrap();
        assert_eq!((l.size, l.rank, l.local_rank), (8, Some(5), Some(1)));
    }

    #[test]
    fn a_batch_script_without_srun_is_one_process() {
        assert_eq!(detect_launch_from(env(&[("SLURM_NTASKS", "4"), ("SLURM_JOB_ID", "9")])), None);
        let l = detect_launch_from(env(&[("SLURM_NTASKS", "4"), ("SLURM_STEP_ID", "0")])).unwrap();
        assert_eq!((l.size, l.var), (4, "SLURM_NTASKS"));
        assert_eq!(detect_launch_from(env(&[])), None);
    }
}
