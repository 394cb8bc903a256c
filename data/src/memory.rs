//! The memory of the machine and the check of an estimate against it, the one home of both
//! (`bc-cli synth` and `bc-cli train` refuse through here): [`machine_memory`] (Linux:
//! `MemTotal` of `/proc/meminfo`), [`MemoryNeed`] (an estimate part by part and the field most
//! responsible, [`main_cause`]), [`check`] and its error [`OutOfMemory`], which says how much
//! memory the configuration would need, how much the machine has and which field to reduce.
//! The estimates themselves are checked arithmetic ([`boldcast_core::memory`]) done by those
//! who know what they allocate ([`crate::synth`] for a synthetic dataset, the train crate for
//! a run).

use boldcast_core::memory::format_bytes;
use std::fmt;

/// The machine's memory in bytes: `MemTotal` of `/proc/meminfo` on Linux; `None` where it
/// cannot be read (then only the overflow checks apply).
pub fn machine_memory() -> Option<u64> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
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
    /// The estimate.
    pub need: MemoryNeed,
    /// The machine's memory, in bytes.
    pub available: u64,
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
        Some(a) if need.total() as u64 > a => Err(OutOfMemory { need, available: a }),
        _ => Ok(need),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
