//! The library API on a model of its own (the CPU backend, random weights): the layout of
//! [`run_forecasts`], a context at least as long as the run being the full one, the pooled
//! embeddings (the mean, and the correlation on known values), and a run shorter than a
//! token.

use super::*;
use boldcast_core::{Model, ModelConfig};
use boldcast_cpu::CpuModel;
use boldcast_data::{Dataset, WindowRef, WindowSpec};
use boldcast_fixtures::{Ar1Spec, Layout};

/// 23 TRs of 3 parcels (11 tokens of 2 TRs) and a one-layer model with horizons 1 and 2.
fn setup() -> (CpuModel<f32>, Dataset) {
    let fx = Ar1Spec::new(Layout { subjects: 1, runs: 1, trs: 23, parcels: 3, seed: 3 }, 0.8);
    let ds = Dataset::from_synth(&fx.generate().unwrap(), None).unwrap();
    let cfg = ModelConfig::builder().d_in(2).d_model(8).n_layers(1).k_neighbors(0).horizons(&[1, 2]).build().unwrap();
    (CpuModel::new(cfg, None, 7).unwrap(), ds)
}

#[test]
fn forecasts_are_the_forward_of_the_run_in_the_files_layout() {
    let (model, ds) = setup();
    let full = run_forecasts(&model, &ds.runs[0], &Context { len: ContextLen::Full, stride: 1, batch: 4 }).unwrap();
    assert_eq!(full.shape(), [11, 2, 2, 3]);
    let spec = WindowSpec { window: 22, stride: 1, d_in: 2 };
    let want = model.forward(&ds.tokens(&[WindowRef { run: 0, start: 0 }], &spec).unwrap()).unwrap();
    for (i, h, j, p) in
        (0..11).flat_map(|i| (0..2).flat_map(move |h| (0..2).flat_map(move |j| (0..3).map(move |p| (i, h, j, p)))))
    {
        assert_eq!(full.std[full.index(i, h, j, p)], want.at(0, i, p, h, j), "[{i}, {h}, {j}, {p}]");
    }
    assert_eq!((full.last_tr(10), full.target_tr(10, 1, 1)), (21, 21 + 2 + 1 + 1));
    // A context as long as the run is the full one, bit for bit.
    let long = run_forecasts(&model, &ds.runs[0], &Context { len: ContextLen::Last(11), stride: 1, batch: 4 }).unwrap();
    assert_eq!(long, full);
    // A short context differs once the run is longer than it.
    let short = run_forecasts(&model, &ds.runs[0], &Context { len: ContextLen::Last(3), stride: 1, batch: 4 }).unwrap();
    let first = full.index(3, 0, 0, 0);
    assert_eq!(short.std[..first], full.std[..first], "tokens 0..3 have seen the same tokens");
    assert_ne!(short.std[first..], full.std[first..]);
}

/// With a stride, token t's forecast is the exact one of the context it saw: under `Last(4)`
/// with stride 2 on 11 tokens the tokens saw 1, 2, 3, 4, 3, 4, 3, 4, 3, 4, 4 tokens, and
/// each equals, bit for bit, the exact (stride 1) forecast under `Last` of that count.
#[test]
fn a_strided_forecast_is_the_exact_one_of_the_context_each_token_saw() {
    let (model, ds) = setup();
    let ctx = |k, stride| Context { len: ContextLen::Last(k), stride, batch: 2 };
    let strided = run_forecasts(&model, &ds.runs[0], &ctx(4, 2)).unwrap();
    let exact: Vec<RunForecast> = (1..=4).map(|c| run_forecasts(&model, &ds.runs[0], &ctx(c, 1)).unwrap()).collect();
    let seen = [1, 2, 3, 4, 3, 4, 3, 4, 3, 4, 4];
    let row = strided.index(1, 0, 0, 0);
    for (t, &c) in seen.iter().enumerate() {
        let token = &strided.std[t * row..(t + 1) * row];
        assert_eq!(token, &exact[c - 1].std[t * row..(t + 1) * row], "token {t} saw {c} tokens");
        if c < 4 && t >= 4 {
            assert_ne!(token, &exact[3].std[t * row..(t + 1) * row], "token {t}: fewer tokens, another forecast");
        }
    }
}

#[test]
fn the_pooled_embedding_is_the_mean_over_tokens() {
    let (model, ds) = setup();
    let ctx = Context { len: ContextLen::Last(4), stride: 1, batch: 2 };
    let e = run_embeddings(&model, &ds.runs[0], &ctx).unwrap();
    assert_eq!(e.shape(), boldcast_core::EmbedShape::new(1, 11, 3, 8));
    let pooled = pooled_embedding(&model, &ds.runs[0], &ctx).unwrap();
    for (p, m) in [(0, 0), (2, 7)] {
        let mean = (0..11).map(|t| e.data()[(t * 3 + p) * 8 + m] as f64).sum::<f64>() / 11.0;
        assert!((pooled.parcel(p)[m] as f64 - mean).abs() < 1e-6);
    }
}

/// Embeddings `(batch, time, 4, 2)` of known correlations (`rows` = batch * time = 4 tokens):
/// parcel 0 is `(x, y)`, parcel 1 `(2 x + 5, 2 y - 1)`, parcel 2 `(5 - x, y)`, parcel 3
/// constant, with `x = 1, 2, 3, 4` and `y = 0, 1, 0, 1`.
fn known_embeddings(batch: usize, time: usize) -> boldcast_core::Embeddings<f32> {
    let (x, y) = ([1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0]);
    let data = (0..4).flat_map(|t| [x[t], y[t], 2.0 * x[t] + 5.0, 2.0 * y[t] - 1.0, 5.0 - x[t], y[t], 7.0, 7.0]);
    boldcast_core::Embeddings::new(boldcast_core::EmbedShape::new(batch, time, 4, 2), data.collect()).unwrap()
}

#[test]
fn the_correlation_pooling_of_known_embeddings() {
    let r = pool_corr(&known_embeddings(1, 4));
    // Centred, x is (-1.5, -0.5, 0.5, 1.5) (squares sum to 5) and y (-0.5, 0.5, -0.5, 0.5)
    // (sum 1): parcel 1 is a scaled parcel 0 (r = 1), and parcel 2 against either has
    // (-5 + 1) / sqrt(6 * 6) = -2/3 (its first feature against, its second along).
    assert_eq!(r.parcels, 4);
    let want = [[1.0, 1.0, -2.0 / 3.0, 0.0], [1.0, 1.0, -2.0 / 3.0, 0.0], [-2.0 / 3.0, -2.0 / 3.0, 1.0, 0.0], [0.0; 4]];
    for (p, row) in want.iter().enumerate() {
        for (q, w) in row.iter().enumerate() {
            assert!((r.at(p, q) - w).abs() < 1e-12, "r[{p}, {q}] = {}, want {w}", r.at(p, q));
        }
    }
    // The constant parcel correlates with nothing, itself included.
    assert_eq!(r.at(3, 3), 0.0);
    let up = r.upper();
    assert_eq!(up.len(), 6);
    assert!((up[0] - 1.0).abs() < 1e-12 && (up[3] + 2.0 / 3.0).abs() < 1e-12 && up[5] == 0.0, "{up:?}");
    // Batch and time are both samples: two windows of two tokens pool as one of four.
    assert_eq!(pool_corr(&known_embeddings(2, 2)), r);
    assert_eq!(serde_json::to_value(Pool::Corr).unwrap(), Pool::Corr.name());
}

#[test]
fn the_pooled_correlation_is_that_of_the_run_embeddings() {
    let (model, ds) = setup();
    let ctx = Context { len: ContextLen::Last(4), stride: 1, batch: 2 };
    let e = run_embeddings(&model, &ds.runs[0], &ctx).unwrap();
    let r = pooled_correlation(&model, &ds.runs[0], &ctx).unwrap();
    // Parcels 0 and 2 by the definition, from the 11 tokens' 8-vectors.
    let at = |t: usize, p: usize, m: usize| e.data()[(t * 3 + p) * 8 + m] as f64;
    let mean = |p: usize, m: usize| (0..11).map(|t| at(t, p, m)).sum::<f64>() / 11.0;
    let g = |t, p, m| at(t, p, m) - mean(p, m);
    let dot =
        |p, q| (0..11).flat_map(|t| (0..8).map(move |m| (t, m))).map(|(t, m)| g(t, p, m) * g(t, q, m)).sum::<f64>();
    let want = dot(0, 2) / (dot(0, 0) * dot(2, 2)).sqrt();
    assert!((r.at(0, 2) - want).abs() < 1e-9 && r.at(2, 0) == r.at(0, 2), "{} vs {want}", r.at(0, 2));
    assert!(want.abs() > 0.01 && (r.at(1, 1) - 1.0).abs() < 1e-12);
}

#[test]
fn a_run_shorter_than_one_token_is_named() {
    let (model, ds) = setup();
    let one = boldcast_fixtures::SynthRun {
        subject: "01".into(),
        run: "1".into(),
        n_tr: 1,
        parcels: ds.parcels,
        data: (0..ds.parcels).map(|q| q as f64).collect(),
    };
    let short = boldcast_data::Dataset::from_synth(&[one], None).unwrap();
    let e = run_forecasts(&model, &short.runs[0], &Context { len: ContextLen::Full, stride: 1, batch: 1 })
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 TRs, shorter than one window of 2"), "{e}");
}
