//! The fitted linear baselines of `eval` on data whose exact floor is known: the VAR(1)
//! fixture (`var1` reaches its floor, which no per-parcel predictor can), the AR(1) fixture
//! (`ar_p` chooses p = 1 and reaches the floor), and AR(2) data (`ar_p` chooses p = 2 and
//! beats the iterated AR(1)), and data of two latent sources (`var_pca` keeps rank 2 or more
//! and matches `var_p`). Training and held-out subjects are disjoint, as in `eval`.

use boldcast_baselines::var::VarChoice;
use boldcast_baselines::{fit_baselines, score_baselines, Row};
use boldcast_data::{Dataset, WindowSpec};
use boldcast_fixtures::{Ar1Spec, Layout, RhoSpec, SynthRun, Var1Spec};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// 12 subjects of one long run each: 8 train the baselines, 4 score them.
const SUBJECTS: usize = 12;
const TRAIN: usize = 8;
const TRS: usize = 20_000;

fn layout(parcels: usize) -> Layout {
    Layout { subjects: SUBJECTS, runs: 1, trs: TRS, parcels, seed: 11 }
}

/// The rows of every baseline on the held-out subjects' windows of 32 TRs.
fn rows(ds: &Dataset, horizons: &[usize], d_in: usize) -> (boldcast_baselines::Baselines, Vec<Row>) {
    let train: Vec<usize> = (0..TRAIN).collect();
    let heldout: Vec<usize> = (TRAIN..SUBJECTS).collect();
    let spec = WindowSpec { window: 32, stride: 32, d_in };
    let b = fit_baselines(ds, &train, horizons, &spec).unwrap();
    let windows = ds.windows_of(&spec, &heldout).unwrap();
    let rows = score_baselines(&b, ds, &spec, &windows, 256).unwrap();
    (b, rows)
}

fn mean(rows: &[Row], name: &str) -> f64 {
    rows.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no row {name}")).mean
}

#[test]
fn var1_reaches_the_exact_floor_of_the_var1_fixture() {
    let fx = Var1Spec { layout: layout(8), self_coef: 0.5, neighbor_coef: 0.3, k: 3 };
    let ds = Dataset::from_synth(&fx.generate().unwrap(), None).unwrap();
    let h = [1, 3];
    let (b, rows) = rows(&ds, &h, 1);
    let floor = fx.floor(&h, 1).unwrap();
    let (var1, ar_p) = (mean(&rows, "var1"), mean(&rows, "ar_p"));
    println!(
        "VAR(1) fixture: var1 {var1:.5}, var_p {:.5}, ar_p {ar_p:.5}, exact floor {:.5}",
        mean(&rows, "var_p"),
        floor.overall
    );
    println!("choices: {:?}", b.choices());
    assert!((var1 / floor.overall - 1.0).abs() < 0.01, "var1 {var1} vs the floor {}", floor.overall);
    let r = rows.iter().find(|r| r.name == "var1").unwrap();
    for (v, f) in r.per_horizon.iter().zip(&floor.per_horizon) {
        assert!((v / f - 1.0).abs() < 0.02, "per horizon {:?} vs {:?}", r.per_horizon, floor.per_horizon);
    }
    // A per-parcel predictor cannot reach the floor of coupled parcels.
    assert!(ar_p > 1.03 * var1, "ar_p {ar_p} vs var1 {var1}");
    let VarChoice::Fitted { p, lambda, p_max, cv, .. } = &b.var1.choice else { panic!("{:?}", b.var1.choice) };
    assert_eq!((*p, *p_max, cv.len()), (1, 1, boldcast_baselines::var::RIDGE_GRID.len()));
    // Plenty of data: a small penalty (the largest within the tolerance of the best).
    assert!(*lambda <= 1e-2, "penalty {lambda}");
    // VAR(p) considers every order up to 8 (8 parcels x 8 lags = 64 features) and, on VAR(1)
    // data, keeps a low one.
    let VarChoice::Fitted { p, p_max, .. } = &b.var_p.choice else { panic!("{:?}", b.var_p.choice) };
    assert_eq!(*p_max, 8);
    assert!(*p <= 2, "var_p chose p = {p} on VAR(1) data");
    assert!((mean(&rows, "var_p") / var1 - 1.0).abs() < 0.005);
}

#[test]
fn ar_p_chooses_p1_and_reaches_the_floor_of_the_ar1_fixture() {
    let fx = Ar1Spec { rho: RhoSpec::Range(0.6, 0.9), ..Ar1Spec::new(layout(4), 0.0) };
    let ds = Dataset::from_synth(&fx.generate().unwrap(), None).unwrap();
    for (h, d) in [(vec![1, 5], 1), (vec![1, 3], 2)] {
        let (b, rows) = rows(&ds, &h, d);
        let floor = fx.floor(&h, d).unwrap().overall;
        let ar_p = mean(&rows, "ar_p");
        println!(
            "AR(1) fixture, horizons {h:?}, D {d}: ar_p p = {} {ar_p:.5}, floor {floor:.5}, cv {:?}",
            b.ar_choice.p, b.ar_choice.cv_mse
        );
        assert_eq!(b.ar_choice.p, 1, "cross-validated MSE per order {:?}", b.ar_choice.cv_mse);
        // Every order up to the window's 32 TRs is tried.
        assert_eq!((b.ar_choice.p_max, b.ar_choice.cv_mse.len()), (32, 32));
        assert!((ar_p / floor - 1.0).abs() < 0.01, "ar_p {ar_p} vs the floor {floor}");
        // On AR(1) data the iterated AR(1) is as good, and the window mean is far worse.
        assert!((mean(&rows, "ar1_iterated") / ar_p - 1.0).abs() < 0.005);
        assert!(mean(&rows, "window_mean") > 1.2 * ar_p);
    }
}

/// One run of `TRS` TRs x `parcels` per subject, subject by subject: `data()` gives its
/// values, TR-major.
fn subject_runs(parcels: usize, mut data: impl FnMut() -> Vec<f64>) -> Vec<SynthRun> {
    let run = |s: usize, data| SynthRun { subject: format!("{:02}", s + 1), run: "1".into(), n_tr: TRS, parcels, data };
    (0..SUBJECTS).map(|s| run(s, data())).collect()
}

/// AR(2) runs `x(n) = 1.2 x(n-1) - 0.5 x(n-2) + e` (an oscillation), unit-variance innovations.
fn ar2_runs(parcels: usize) -> Vec<SynthRun> {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    subject_runs(parcels, || {
        let mut data = vec![0.0f64; TRS * parcels];
        for p in 0..parcels {
            let (mut a, mut b) = (0.0f64, 0.0f64);
            for n in 0..TRS + 100 {
                let e: f64 = StandardNormal.sample(&mut rng);
                (a, b) = (1.2 * a - 0.5 * b + e, a);
                if n >= 100 {
                    data[(n - 100) * parcels + p] = a;
                }
            }
        }
        data
    })
}

#[test]
fn ar_p_chooses_p2_on_ar2_data_and_beats_the_iterated_ar1() {
    let ds = Dataset::from_synth(&ar2_runs(2), None).unwrap();
    let (b, rows) = rows(&ds, &[1, 4], 1);
    println!("AR(2) data: ar_p p = {}, cv {:?}", b.ar_choice.p, b.ar_choice.cv_mse);
    assert_eq!(b.ar_choice.p, 2, "{:?}", b.ar_choice.cv_mse);
    let r = |n: &str| rows.iter().find(|r| r.name == n).unwrap().per_horizon.clone();
    let (ar_p, it) = (r("ar_p"), r("ar1_iterated"));
    // The one-step coefficient raised to a power misses the oscillation, at every horizon.
    assert!(ar_p[0] < 0.8 * it[0] && ar_p[1] < 0.9 * it[1], "ar_p {ar_p:?} vs ar1_iterated {it:?}");
    // The exact floors of this AR(2): 1-step innovation variance over the process variance.
    let var = (1.0 + 0.5) / ((1.0 - 0.5) * ((1.0 + 0.5f64).powi(2) - 1.2f64.powi(2)));
    assert!((ar_p[0] * var - 1.0).abs() < 0.02, "ar_p h1 {} vs 1 / var {}", ar_p[0], 1.0 / var);
}

/// Runs of `parcels` parcels driven by two latent AR(1) sources (rho 0.9 and 0.6, unit
/// innovations) through fixed loadings, plus independent noise of standard deviation 0.3.
fn low_rank_runs(parcels: usize) -> Vec<SynthRun> {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let loading = |p: usize, k: usize| ((p * 7 + k * 3) % 5) as f64 / 4.0 - 0.5 + if k == p % 2 { 0.8 } else { 0.0 };
    subject_runs(parcels, || {
        let mut data = vec![0.0f64; TRS * parcels];
        let mut z = [0.0f64; 2];
        for n in 0..TRS + 100 {
            for (k, rho) in [0.9, 0.6].into_iter().enumerate() {
                let e: f64 = StandardNormal.sample(&mut rng);
                z[k] = rho * z[k] + e;
            }
            for p in 0..parcels {
                let e: f64 = StandardNormal.sample(&mut rng);
                if n >= 100 {
                    data[(n - 100) * parcels + p] = loading(p, 0) * z[0] + loading(p, 1) * z[1] + 0.3 * e;
                }
            }
        }
        data
    })
}

#[test]
fn var_pca_finds_the_rank_of_low_rank_data_and_beats_the_per_parcel_ar() {
    let ds = Dataset::from_synth(&low_rank_runs(8), None).unwrap();
    let (b, rows) = rows(&ds, &[1, 3], 1);
    let (pca, var_p, ar_p) = (mean(&rows, "var_pca"), mean(&rows, "var_p"), mean(&rows, "ar_p"));
    let VarChoice::Fitted { rank, p, .. } = &b.var_pca.choice else { panic!("{:?}", b.var_pca.choice) };
    println!("low-rank data: var_pca {pca:.5} (rank {rank:?}, p {p}), var_p {var_p:.5}, ar_p {ar_p:.5}");
    // Two sources: rank 2 or more (of 1, 2, 4), and as good as the full VAR(p).
    assert!(rank.is_some_and(|r| r >= 2), "rank {rank:?}, p {p}");
    assert!((pca / var_p - 1.0).abs() < 0.01, "var_pca {pca} vs var_p {var_p}");
    // The sources are shared: pooling the parcels beats each parcel's own past.
    assert!(pca < 0.97 * ar_p, "var_pca {pca} vs ar_p {ar_p}");
}
