//! The data of a run: the dataset of a configuration ([`load_data`]: `data.dir`, or the
//! synthetic AR(1) fixture of `[data.synthetic]` generated in memory), its subject split
//! ([`Split`], decided by the caller), the training and validation windows at `window.stride`,
//! the adjacency for `model.k_neighbors` (from the training runs) and the loss floor shown
//! beside the validation loss (exact for the fixture, else empirical on the held-out runs).
//! [`load_data`] also runs the filtered-input check ([`boldcast_data::spectrum`]): `train`,
//! `eval` and `forecast` warn when the runs look low-pass or band-pass filtered.

use crate::config::RunConfig;
use crate::error::TrainError;
use boldcast_core::Adjacency;
use boldcast_data::spectrum::{input_spectrum, InputSpectrum};
use boldcast_data::{Dataset, WindowRef, WindowSpec};
use boldcast_fixtures::{circle_centroids, Ar1Spec, Layout};

/// The subject split of a run: [`boldcast_data::split()`] decides it from `[data]`.
pub use boldcast_data::split::Split;

/// What a checkpoint records of its training data, to tell when it is given other data: the
/// parcel names and the fingerprint of the training runs ([`Dataset::fingerprint`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DataIdentity {
    /// The parcel names, in column order.
    pub parcels: Vec<String>,
    /// The fingerprint of the training runs.
    pub fingerprint: String,
    /// What the run trained on ([`crate::provenance::Provenance`]), recorded beside the
    /// identity; not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<serde_json::Value>,
}

impl DataIdentity {
    /// The identity of `ds` trained on its runs `train_runs`.
    pub fn of(ds: &Dataset, train_runs: &[usize]) -> Result<Self, TrainError> {
        Ok(Self { parcels: ds.parcel_names.clone(), fingerprint: ds.fingerprint(train_runs)?, provenance: None })
    }

    /// What differs between the identity `self` a checkpoint recorded and `now`, in words;
    /// `None` when they agree.
    pub fn differs_from(&self, now: &DataIdentity) -> Option<String> {
        if self.parcels != now.parcels {
            let show = |p: &[String]| {
                let head: Vec<&str> = p.iter().take(4).map(String::as_str).collect();
                format!("{} parcels ({}{})", p.len(), head.join(", "), if p.len() > 4 { ", ..." } else { "" })
            };
            return Some(format!(
                "the parcel names differ: trained on {}, the data has {}",
                show(&self.parcels),
                show(&now.parcels)
            ));
        }
        (self.fingerprint != now.fingerprint).then(|| {
            format!(
                "the training data differ from those it was trained on (fingerprint {}, the data's now {}): a \
                 training file was replaced or edited, or the split differs",
                self.fingerprint, now.fingerprint
            )
        })
    }
}

/// A loss floor, overall and per horizon.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorInfo {
    /// Mean over horizons.
    pub overall: f64,
    /// Per horizon.
    pub per_horizon: Vec<f64>,
    /// `"exact AR(1) floor"` or `"single-lag AR reference (held-out runs)"` (`1 - acf(L)^2`, no floor on real data).
    pub kind: String,
}

/// A dataset of a configuration: `data.dir` or the synthetic fixture.
pub struct LoadedData {
    /// The runs.
    pub ds: Dataset,
    /// The fixture, when synthetic.
    pub fixture: Option<Ar1Spec>,
    /// Where the data came from, in words.
    pub source: String,
    /// Notes for standard error.
    pub notes: Vec<String>,
    /// The filtered-input check of the runs ([`boldcast_data::spectrum`]); its warning, when
    /// it fires, is among the notes.
    pub spectrum: InputSpectrum,
}

fn load_dir(dir: &std::path::Path, sel: &boldcast_data::Selection) -> Result<LoadedData, TrainError> {
    let ds = Dataset::load_with(dir, sel)?;
    let mut notes = ds.notes();
    let spectrum = input_spectrum(&ds)?;
    notes.extend(spectrum.warning());
    let source = format!("{} ({} runs, {} parcels)", dir.display(), ds.runs.len(), ds.parcels);
    Ok(LoadedData { ds, fixture: None, source, notes, spectrum })
}

/// Loads `data.dir`, or generates the synthetic AR(1) fixture of `[data.synthetic]` (parcels
/// on a circle, so the adjacency is the ring). First, [`RunConfig::check_memory`]: a
/// configuration whose run would not fit in the machine's memory (the synthetic data in full,
/// for `data.dir` the model) is refused before anything is generated or read.
pub fn load_data(cfg: &RunConfig) -> Result<LoadedData, TrainError> {
    cfg.check_memory()?;
    if let Some(dir) = &cfg.data.dir {
        return load_dir(dir, &cfg.data.selection());
    }
    let s = &cfg.data.synthetic;
    let layout = Layout { subjects: s.subjects, runs: s.runs, trs: s.trs, parcels: s.parcels, seed: s.seed };
    let fx = Ar1Spec::new(layout, s.rho);
    let runs = fx.generate()?;
    let ds = Dataset::from_synth_owned(runs, Some(circle_centroids(s.parcels)))?;
    let source = format!(
        "synthetic AR(1), rho {}, {} subjects x {} runs x {} TRs, {} parcels, seed {}",
        s.rho, s.subjects, s.runs, s.trs, s.parcels, s.seed
    );
    let spectrum = input_spectrum(&ds)?;
    Ok(LoadedData { ds, fixture: Some(fx), source, notes: Vec::new(), spectrum })
}

/// The empirical single-lag floor of the runs `runs`, per horizon.
pub fn empirical_floor(ds: &Dataset, runs: &[usize], horizons: &[usize], d_in: usize) -> Result<FloorInfo, TrainError> {
    let series = ds.series_of(runs)?;
    let mut per = Vec::with_capacity(horizons.len());
    for &h in horizons {
        let pp = boldcast_core::floor::empirical_floor_per_parcel(&series, &[h], d_in)?;
        per.push(pp.iter().sum::<f64>() / pp.len() as f64);
    }
    let overall = per.iter().sum::<f64>() / per.len() as f64;
    Ok(FloorInfo { overall, per_horizon: per, kind: "single-lag AR reference (held-out runs)".into() })
}

/// The windows of `runs` (`what`: which, for the note), less those with a TR of framewise
/// displacement above `fd_max` mm where it is set ([`boldcast_data::motion::low_motion_windows`]);
/// what was left out goes to `notes`.
pub fn windows_of_runs(
    ds: &Dataset,
    spec: &WindowSpec,
    runs: &[usize],
    fd_max: Option<f64>,
    (what, notes): (&str, &mut Vec<String>),
) -> Result<Vec<WindowRef>, TrainError> {
    let all = ds.windows_of(spec, runs)?;
    let Some(fd_max) = fd_max else { return Ok(all) };
    let (kept, dropped) = boldcast_data::motion::low_motion_windows(ds, &all, spec, fd_max)?;
    notes.push(format!(
        "data.fd_max = {fd_max} mm: left out {dropped} of {} {what} windows with a TR of framewise displacement \
         above it",
        all.len()
    ));
    Ok(kept)
}

/// Everything a training run needs from the data.
pub struct TrainData {
    /// The dataset.
    pub ds: Dataset,
    /// Windows.
    pub spec: WindowSpec,
    /// The subject split.
    pub split: Split,
    /// Training windows (the runs of the training subjects).
    pub train_windows: Vec<WindowRef>,
    /// Validation windows (the held-out runs).
    pub val_windows: Vec<WindowRef>,
    /// The adjacency for `model.k_neighbors` (from the training runs).
    pub adjacency: Option<Adjacency>,
    /// The floor beside the validation loss: exact for the fixture, else empirical on the
    /// held-out runs.
    pub floor: FloorInfo,
    /// Where the data came from.
    pub source: String,
    /// Notes for standard error.
    pub notes: Vec<String>,
    /// The parcel names and the fingerprint of the training runs (recorded in checkpoints).
    pub identity: DataIdentity,
    /// The filtered-input check of the runs (in `summary.json`).
    pub spectrum: InputSpectrum,
}

impl TrainData {
    /// The data of `cfg`: [`load_data`], split by subject as `[data]` says
    /// ([`boldcast_data::split()`], seeded by `train.seed`), then [`TrainData::new`].
    pub fn load(cfg: &RunConfig) -> Result<TrainData, TrainError> {
        let loaded = load_data(cfg)?;
        let split = boldcast_data::split(&loaded.ds, &cfg.data, cfg.train.seed)?;
        TrainData::new(loaded, split, cfg)
    }

    /// The windows, adjacency and floor of `loaded` split by `split`, as `cfg` says. First,
    /// [`RunConfig::check_memory_of`] the dataset: a run that would not fit in the machine's
    /// memory is refused before the windows, the adjacency or the model are made.
    pub fn new(loaded: LoadedData, split: Split, cfg: &RunConfig) -> Result<TrainData, TrainError> {
        let LoadedData { ds, fixture, source, mut notes, spectrum } = loaded;
        cfg.check_memory_of(&ds, fixture.is_none().then_some(&split.heldout_runs[..]))?;
        let spec = WindowSpec { window: cfg.window.window, stride: cfg.window.stride, d_in: cfg.model.d_in };
        let fd = cfg.data.fd_max;
        let train_windows = windows_of_runs(&ds, &spec, &split.train_runs, fd, ("training", &mut notes))?;
        let val_windows = windows_of_runs(&ds, &spec, &split.heldout_runs, fd, ("validation", &mut notes))?;
        let h = &cfg.model.horizons;
        let floor = match &fixture {
            Some(fx) => {
                let f = fx.floor(h, spec.d_in)?;
                FloorInfo { overall: f.overall, per_horizon: f.per_horizon, kind: "exact AR(1) floor".into() }
            }
            None => empirical_floor(&ds, &split.heldout_runs, h, spec.d_in)?,
        };
        let adjacency = ds.adjacency(cfg.model.k_neighbors, &split.train_runs)?;
        let provenance = crate::provenance::Provenance::of(&ds, &split, cfg.data.dir.clone(), &source);
        let identity =
            DataIdentity { provenance: Some(provenance.to_value()), ..DataIdentity::of(&ds, &split.train_runs)? };
        Ok(TrainData {
            ds,
            spec,
            split,
            train_windows,
            val_windows,
            adjacency,
            floor,
            source,
            notes,
            identity,
            spectrum,
        })
    }
}
