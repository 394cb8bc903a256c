//! The memory of the machine and the check of an estimate against it, the one home of both
//! (`bc-cli synth` and `bc-cli train` refuse through here): [`machine_memory`] (Linux: the
//! least of `MemTotal` of `/proc/meminfo`, the cgroup's limit and `RLIMIT_AS`), [`MemoryNeed`] (an estimate part by part and the field most
//! responsible, [`main_cause`]), [`check`] and its error [`OutOfMemory`], which says how much
//! memory the configuration would need, how much the machine has and which field to reduce.
//! The estimates themselves are checked arithmetic ([`boldcast_core::memory`]) done by those
//! who know what they allocate (the data crate's `synth` for a synthetic dataset, the train crate for
//! a run).

use boldcast_core::memory::format_bytes;
use std::fmt;

/// The memory this process may use, in bytes: the least of `MemTotal` of `/proc/meminfo`, the
/// cgroup's limit (v2 `memory.max`, v1 `memory.limit_in_bytes`, of the process's cgroup and
/// its ancestors: a Slurm job, a container) and `RLIMIT_AS` (`ulimit -v`), on Linux ([`limits`]);
/// `None` where none can be read (then only the overflow checks apply).
pub fn machine_memory() -> Option<u64> {
    limits().into_iter().map(|(_, b)| b).min()
}

/// A limit on the memory of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The machine's memory, `MemTotal` of `/proc/meminfo`.
    MemTotal,
    /// The memory limit of the process's cgroup or one of its ancestors (v2 or v1).
    Cgroup,
    /// `RLIMIT_AS`, the address space `ulimit -v` sets.
    AddressSpace,
}

impl Limit {
    /// The limit in words, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Limit::MemTotal => "MemTotal",
            Limit::Cgroup => "the cgroup's memory limit",
            Limit::AddressSpace => "RLIMIT_AS, ulimit -v",
        }
    }
}

/// Every memory limit that applies to this process, in bytes; those that are unlimited or
/// unreadable are left out.
pub fn limits() -> Vec<(Limit, u64)> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let mut out = Vec::new();
    if let Some(m) = read("/proc/meminfo").as_deref().and_then(parse_meminfo) {
        out.push((Limit::MemTotal, m));
    }
    if let Some(c) = read("/proc/self/cgroup").and_then(|t| cgroup_limit(std::path::Path::new("/sys/fs/cgroup"), &t)) {
        out.push((Limit::Cgroup, c));
    }
    if let Some(a) = read("/proc/self/limits").as_deref().and_then(parse_address_space_limit) {
        out.push((Limit::AddressSpace, a));
    }
    out
}

/// The limit ([`limits`]) that is `bytes`, for the message of [`OutOfMemory`].
fn limit_of(bytes: u64) -> Option<Limit> {
    limits().into_iter().find(|(_, b)| *b == bytes).map(|(l, _)| l)
}

/// The least memory limit of the cgroups named in `proc_cgroup` (the text of
/// `/proc/self/cgroup`) under the cgroup file system `root`, each cgroup's ancestors included:
/// v2 (`0::/path`, `<root>/path/memory.max`, `max` for none) and v1 (`N:...memory...:/path`,
/// `<root>/memory/path/memory.limit_in_bytes`, 2^62 or more for none).
pub fn cgroup_limit(root: &std::path::Path, proc_cgroup: &str) -> Option<u64> {
    let mut best: Option<u64> = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let (base, file) = match controllers {
            "" => (root.to_path_buf(), "memory.max"),
            c if c.split(',').any(|c| c == "memory") => (root.join("memory"), "memory.limit_in_bytes"),
            _ => continue,
        };
        let mut dir = std::path::PathBuf::from(path.trim_start_matches('/'));
        loop {
            let text = std::fs::read_to_string(base.join(&dir).join(file)).ok();
            let limit = text.as_deref().map(str::trim).and_then(|t| t.parse::<u64>().ok()).filter(|&b| b < 1 << 62);
            best = match (best, limit) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if !dir.pop() {
                break;
            }
        }
    }
    best
}

/// The soft `Max address space` of a `/proc/self/limits` text, in bytes (`None`: unlimited).
pub fn parse_address_space_limit(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("Max address space"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
pub fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let mut it = line.split_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    match it.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// The threads a step runs on: `RAYON_NUM_THREADS` when set to a positive number (what the
/// CPU backend's pool uses), else the available parallelism.
pub fn step_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// What something would need, part by part, in bytes, and what is most responsible for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryNeed {
    /// What needs it, e.g. `"the configuration"`.
    pub what: String,
    /// The parts, e.g. `("data", bytes)`, in the order they are printed.
    pub parts: Vec<(&'static str, usize)>,
    /// The field (and its value) whose reduction helps most ([`main_cause`]), if one does.
    pub cause: Option<(String, String)>,
}

impl MemoryNeed {
    /// The sum of the parts (saturating; the estimators check their sums).
    pub fn total(&self) -> usize {
        self.parts.iter().fold(0usize, |a, (_, b)| a.saturating_add(*b))
    }
}

/// The field whose value, were it 1, would shrink the estimate `total` the most:
/// `candidates` are `(field, value, the estimate with that field at 1)` (`None`: it would
/// not compute). Only a field that at least halves the estimate is named.
pub fn main_cause(total: usize, candidates: &[(&str, usize, Option<usize>)]) -> Option<(String, String)> {
    candidates
        .iter()
        .filter(|(_, v, _)| *v > 1)
        .filter_map(|(f, v, t)| t.map(|t| (t, *f, *v)))
        .filter(|(t, _, _)| *t <= total / 2)
        .min_by_key(|(t, _, v)| (*t, std::cmp::Reverse(*v)))
        .map(|(_, f, v)| (f.to_string(), v.to_string()))
}

/// An estimate larger than the machine's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    /// The estimate (boxed: every error enum that holds this one stays small).
    pub need: Box<MemoryNeed>,
    /// The machine's memory, in bytes.
    pub available: u64,
    /// Which limit that is, when known.
    pub limit: Option<Limit>,
}

impl fmt::Display for OutOfMemory {
    /// `the configuration would need about 512.0 GiB of memory (data 500.0 GiB, parameters and
    /// optimizer 12.0 GiB); this machine has 23.4 GiB: most of it comes from FIELD = VALUE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = &self.need;
        let parts: Vec<String> =
            n.parts.iter().map(|(name, b)| format!("{name} {}", format_bytes(*b as f64))).collect();
        write!(
            f,
            "{} would need about {} of memory ({}); this machine has {}",
            n.what,
            format_bytes(n.total() as f64),
            parts.join(", "),
            format_bytes(self.available as f64)
        )?;
        if let Some(l) = self.limit.filter(|l| *l != Limit::MemTotal) {
            write!(f, " for this process ({})", l.name())?;
        }
        match &n.cause {
            Some((field, value)) => write!(f, ": most of it comes from {field} = {value}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for OutOfMemory {}

/// `need` when it fits in `available` bytes (or when the machine's memory is unknown), else
/// the error saying what it would need.
pub fn check(need: MemoryNeed, available: Option<u64>) -> Result<MemoryNeed, OutOfMemory> {
    match available {
        Some(a) if need.total() as u64 > a => {
            Err(OutOfMemory { need: Box::new(need), available: a, limit: limit_of(a) })
        }
        _ => Ok(need),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_and_address_space_limits_are_read() {
        let d = tempfile::tempdir().unwrap();
        let job = d.path().join("slurm/job_7");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(job.join("memory.max"), "4294967296\n").unwrap();
        std::fs::write(d.path().join("slurm/memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_limit(d.path(), "0::/slurm/job_7\n"), Some(4 << 30));
        // A tighter ancestor wins; a v1 hierarchy is read under memory/.
        std::fs::write(d.path().join("slurm/memory.max"), "1073741824\n").unwrap();
        assert_eq!(cgroup_limit(d.path(), "0::/slurm/job_7\n"), Some(1 << 30));
        let v1 = d.path().join("memory/docker/abc");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "536870912\n").unwrap();
        std::fs::write(d.path().join("memory/memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cgroup_limit(d.path(), "4:cpu:/x\n3:memory:/docker/abc\n"), Some(512 << 20));
        assert_eq!(cgroup_limit(d.path(), "0::/nowhere\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         8589934592           unlimited            bytes\n";
        assert_eq!(parse_address_space_limit(limits), Some(8 << 30));
        assert_eq!(parse_address_space_limit("Max address space  unlimited  unlimited  bytes\n"), None);
        let need = MemoryNeed { what: "the run".into(), parts: vec![("data", 2 << 30)], cause: None };
        let e = OutOfMemory { need: Box::new(need), available: 1 << 30, limit: Some(Limit::Cgroup) }.to_string();
        assert!(e.ends_with("this machine has 1.0 GiB for this process (the cgroup's memory limit)"), "{e}");
    }

    #[test]
    fn meminfo_gives_the_total_in_bytes() {
        let text = "MemTotal:       24522044 kB\nMemFree:         1170648 kB\nMemAvailable:   23012345 kB\n";
        assert_eq!(parse_meminfo(text), Some(24522044 * 1024));
        assert_eq!(parse_meminfo("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemTotal: lots kB\n"), None);
        assert_eq!(parse_meminfo("MemTotal: 1 MB\n"), None);
        #[cfg(target_os = "linux")]
        assert!(machine_memory().is_some_and(|m| m > 1 << 20));
    }

    #[test]
    fn the_error_breaks_the_need_down_and_names_the_cause() {
        let need = MemoryNeed {
            what: "the configuration".into(),
            parts: vec![("data", 500 << 30), ("parameters and optimizer", 12 << 30)],
            cause: Some(("data.synthetic.trs".into(), "1000000000".into())),
        };
        assert_eq!(check(need.clone(), Some(600 << 30)), Ok(need.clone()));
        assert_eq!(check(need.clone(), None), Ok(need.clone()));
        let e = check(need, Some(23 << 30)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the configuration would need about 512.0 GiB of memory (data 500.0 GiB, parameters and optimizer 12.0 \
             GiB); this machine has 23.0 GiB: most of it comes from data.synthetic.trs = 1000000000"
        );
    }

    #[test]
    fn the_cause_is_the_field_that_shrinks_the_estimate_most() {
        let c = [("a", 10, Some(600)), ("b", 1000, Some(20)), ("c", 1, Some(1)), ("d", 5, None)];
        assert_eq!(main_cause(1000, &c), Some(("b".into(), "1000".into())), "c is 1 already, d does not compute");
        // Ties go to the larger value; nothing that does not halve the estimate is named.
        assert_eq!(main_cause(1000, &[("a", 10, Some(20)), ("b", 1000, Some(20))]).unwrap().0, "b");
        assert_eq!(main_cause(1000, &[("a", 10, Some(600))]), None);
    }
}
