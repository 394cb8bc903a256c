//! The fuzz target of the command line's configuration layers: a `--config FILE` resolved
//! over its preset and validated ([`resolve`], what `bc-cli train --config FILE` calls), and
//! its seeds. Shared with the `cargo fuzz` target `cli_config` of `fuzz/` (included by path).

use boldcast_testkit::fuzz::targets::{put, scratch};
use boldcast_testkit::fuzz::{Format, Outcome, Plan, Seed, Target};
use boldcast_train::config::RunConfig;
use boldcast_train::presets::{resolve, Overrides, Purpose, PRESETS};
use std::path::PathBuf;
use std::sync::OnceLock;

/// A `--config` file: written as `fuzz.toml`, resolved for `train` and for `overfit`. The
/// library's parser of the same text ([`RunConfig::from_toml_str`]) accepts exactly what the
/// command line accepts, with the same result. A valid configuration is checked: its TOML text
/// reads back to it, and its parameter count (what building a model computes first) is a
/// number.
pub fn cli_config(bytes: &[u8]) -> Outcome {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    let path = FILE.get_or_init(|| scratch("cli_config").join("fuzz.toml"));
    put(path, bytes);
    let o = Overrides { config: Some(path.clone()), ..Overrides::default() };
    let direct = std::str::from_utf8(bytes).ok().map(|t| RunConfig::from_toml_str(&path.display().to_string(), t));
    let resolved = resolve(&o, "laptop", Purpose::Train);
    if let Some(direct) = &direct {
        match (direct, &resolved) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "the library and the command line read one file alike"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "the same refusal"),
            (a, b) => panic!("the library gives {a:?}, the command line {b:?}"),
        }
    }
    let cfg = resolved.map_err(|e| e.to_string())?;
    let overfit = resolve(&o, "laptop", Purpose::Overfit).map_err(|e| e.to_string())?;
    assert_eq!(cfg, overfit, "without flags, the purpose changes nothing");
    let text = cfg.to_config_file();
    let back = RunConfig::from_toml_str("its own TOML", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back, cfg, "the configuration-file text of a valid configuration reads back to it");
    let _ = cfg.model_config().n_params();
    Ok(())
}

/// The target: the presets as files, and small files that set a few keys (a preset by name,
/// the `eval_every` alias, integers for floats).
pub fn cli_target() -> Target {
    let mut seeds: Vec<Seed> =
        PRESETS.iter().map(|(n, t)| Seed::new(format!("{n}.toml"), Format::Toml, t.as_bytes())).collect();
    for (name, text) in [
        ("partial.toml", "preset = \"quick\"\n\n[train]\nlr = 0.01\nmax_steps = 5\n\n[model]\nhorizons = [1, 2]\n"),
        ("alias.toml", "[train]\neval_every = 4\nbatch_size = 2\n\n[data]\nsubjects_heldout = [\"01\"]\n"),
        ("integers.toml", "[train]\nlr = 1\nmin_lr = 0\nbetas = [0, 0]\n\n[data.synthetic]\nrho = 0\n"),
    ] {
        seeds.push(Seed::new(name, Format::Toml, text.as_bytes()));
    }
    Target {
        name: "cli_config",
        seeds,
        plan: Plan { random: 3000, max_structured: 2000, max_numbers: 600, ..Plan::default() },
        other_input: 0,
        must_name: &[],
        run: Box::new(cli_config),
    }
}
