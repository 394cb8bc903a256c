//! What made a result file: the tool, its version, the git revision it was built from (where
//! the application knows it), the command line and the date ([`MadeBy`]). Every JSON result
//! carries it under `made_by` ([`stamp`]); a table's JSON sidecar carries it for the table.
//!
//! The command line is the process's; an application that is not a command (the Python
//! package) names its call with [`set_invocation`].
//!
//! ```
//! let v = boldcast_storage::made_by::stamp(&serde_json::json!({"mse": 0.5}));
//! assert_eq!(v["mse"], 0.5);
//! assert_eq!(v["made_by"]["tool"], "boldcast");
//! assert!(v["made_by"]["date"].as_str().unwrap().ends_with('Z'));
//! ```

use serde::Serialize;
use std::sync::OnceLock;

/// What made a result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MadeBy {
    /// `boldcast`.
    pub tool: String,
    /// The library's version.
    pub version: String,
    /// The git revision the application was built from, when it knows it.
    pub git_revision: Option<String>,
    /// The command line (or the call that made it).
    pub command_line: Vec<String>,
    /// When, as UTC RFC 3339 (`2026-12-03T14:07:51Z`).
    pub date: String,
}

struct Invocation {
    git_revision: Option<String>,
    command_line: Option<Vec<String>>,
}

static INVOCATION: OnceLock<Invocation> = OnceLock::new();

/// Names the application's build and call once per process: `git_revision` (from its build
/// script) and, for an application that is not a command, the call (`["python",
/// "boldcast.train(...)"]`). Later calls change nothing.
pub fn set_invocation(git_revision: Option<String>, command_line: Option<Vec<String>>) {
    let _ = INVOCATION.set(Invocation { git_revision, command_line });
}

impl MadeBy {
    /// The process's, now.
    pub fn now() -> Self {
        let inv = INVOCATION.get();
        let command_line = inv.and_then(|i| i.command_line.clone()).unwrap_or_else(|| std::env::args().collect());
        Self {
            tool: "boldcast".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            git_revision: inv.and_then(|i| i.git_revision.clone()),
            command_line,
            date: rfc3339(std::time::SystemTime::now()),
        }
    }
}

/// `value` as JSON with `made_by` ([`MadeBy::now`]) added; a value that is not an object is
/// kept under `result`.
pub fn stamp<T: Serialize + ?Sized>(value: &T) -> serde_json::Value {
    let made_by = serde_json::to_value(MadeBy::now()).expect("MadeBy serializes");
    match serde_json::to_value(value).expect("a result serializes") {
        serde_json::Value::Object(mut m) => {
            m.insert("made_by".into(), made_by);
            serde_json::Value::Object(m)
        }
        other => serde_json::json!({"result": other, "made_by": made_by}),
    }
}

/// `t` as UTC RFC 3339, to the second.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn dates_are_utc_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // `date -u -d @1796313071` prints Thu Dec  3 15:51:11 UTC 2026.
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(1_796_313_071)), "2026-12-03T15:51:11Z");
        // A leap day.
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn a_stamp_keeps_the_fields_and_names_the_command_line() {
        let v = stamp(&serde_json::json!({"a": 1}));
        assert_eq!(v["a"], 1);
        let args: Vec<String> = std::env::args().collect();
        assert_eq!(v["made_by"]["command_line"], serde_json::json!(args));
        assert_eq!(v["made_by"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(stamp(&3)["result"], 3);
    }
}
