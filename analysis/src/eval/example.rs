//! A forecast example for the eval figure ([`forecast_example`]): one parcel's true series in
//! one held-out window, the model's forecasts of it at each horizon and the best baseline's
//! of the same TRs ([`add_best_baselines`]), as numbers (the CLI only draws them).

use crate::AnalysisError;
use boldcast_baselines::Baselines;
use boldcast_core::Model;
use boldcast_data::{Dataset, WindowRef, WindowSpec};
use serde::Serialize;

/// The model's forecasts at one horizon, of the TRs of the window they target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HorizonForecast {
    /// The horizon, in tokens.
    pub horizon: usize,
    /// The TR (within the window, from 0) each forecast targets: element `j` of the forecast
    /// at token `t` targets TR `(t + h) D + j`; only those inside the window.
    pub tr: Vec<usize>,
    /// The forecasts (standardized BOLD).
    pub value: Vec<f64>,
}

/// The best baseline's forecasts at one horizon, of the same TRs as the model's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaselineForecast {
    /// The baseline (its row's name, [`super::names::row_words`] in words).
    pub name: String,
    /// Its forecasts, as the model's ([`HorizonForecast`]).
    #[serde(flatten)]
    pub forecast: HorizonForecast,
}

/// One parcel of one held-out window: its values and the model's forecasts of them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ForecastExample {
    /// The run (its entities, e.g. `sub-04_run-1`).
    pub run: String,
    /// The window's first TR in the run.
    pub start: usize,
    /// The parcel's name.
    pub parcel: String,
    /// The parcel's standardized values at the window's TRs.
    pub truth: Vec<f64>,
    /// The forecasts at each horizon.
    pub forecasts: Vec<HorizonForecast>,
    /// The best baseline's forecasts at each horizon (the baseline of lowest held-out MSE at
    /// that horizon); empty when not asked for ([`add_best_baselines`]).
    pub best_baselines: Vec<BaselineForecast>,
}

/// Horizon `i` (`h` tokens) of forecasts `at(t, i, j)` of a window of `nt` tokens of `nd`
/// TRs: element `j` of the forecast at token `t` targets TR `(t + h) D + j`, those inside.
fn horizon_forecast(h: usize, (nt, nd): (usize, usize), at: impl Fn(usize, usize) -> f64) -> HorizonForecast {
    let pts: Vec<(usize, f64)> = (0..nt.saturating_sub(h))
        .flat_map(|t| (0..nd).map(move |j| (t, j)))
        .map(|(t, j)| ((t + h) * nd + j, at(t, j)))
        .collect();
    HorizonForecast { horizon: h, tr: pts.iter().map(|p| p.0).collect(), value: pts.iter().map(|p| p.1).collect() }
}

/// The example of `window`, parcel `parcel`: the model's forward pass over that window alone.
pub fn forecast_example<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    spec: &WindowSpec,
    window: WindowRef,
    parcel: usize,
) -> Result<ForecastExample, AnalysisError> {
    let tokens = ds.tokens::<f32>(&[window], spec)?;
    let pred = model.forward(&tokens)?;
    let (nt, nd) = (spec.tokens(), spec.d_in);
    let run = &ds.runs[window.run];
    let np = ds.parcels;
    let rows = run.rows(window.start, window.start + spec.window)?;
    let truth = (0..spec.window).map(|u| rows[u * np + parcel]).collect();
    let horizons = &model.config().horizons;
    let forecasts = horizons
        .iter()
        .enumerate()
        .map(|(i, &h)| horizon_forecast(h, (nt, nd), |t, j| f64::from(pred.at(0, t, parcel, i, j))))
        .collect();
    Ok(ForecastExample {
        run: run.id.to_string(),
        start: window.start,
        parcel: ds.parcel_names[parcel].clone(),
        truth,
        forecasts,
        best_baselines: Vec::new(),
    })
}

/// Adds to `ex` (of `window`, parcel `parcel`) the forecasts of the best baseline of each
/// horizon, `best[i]` at horizon `i` (a name of [`Baselines::names`]; an unknown one is left
/// out).
pub fn add_best_baselines(
    ex: &mut ForecastExample,
    (b, best): (&Baselines, &[String]),
    (ds, spec): (&Dataset, &WindowSpec),
    window: WindowRef,
    parcel: usize,
) -> Result<(), AnalysisError> {
    let tokens = ds.tokens::<f64>(&[window], spec)?;
    let all = b.forecasts(&tokens);
    let names = b.names();
    for (i, (name, &h)) in best.iter().zip(&b.horizons).enumerate() {
        let Some(k) = names.iter().position(|n| n == name) else { continue };
        let forecast = horizon_forecast(h, (spec.tokens(), spec.d_in), |t, j| all[k].at(0, t, parcel, i, j));
        ex.best_baselines.push(BaselineForecast { name: name.clone(), forecast });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_core::ModelConfig;
    use boldcast_fixtures::{Ar1Spec, Layout};

    /// AR(1) data of `subjects` subjects (2 runs of 40 TRs, 3 parcels), a one-layer model
    /// with tokens of 2 TRs and horizons 1 and 3, and windows of 12 TRs.
    fn setup(subjects: usize) -> (Dataset, boldcast_cpu::CpuModel<f32>, WindowSpec) {
        let fx = Ar1Spec::new(Layout { subjects, runs: 2, trs: 40, parcels: 3, seed: 2 }, 0.8);
        let ds = Dataset::from_synth(&fx.generate().unwrap(), None).unwrap();
        let cfg =
            ModelConfig::builder().d_in(2).d_model(8).n_layers(1).k_neighbors(0).horizons(&[1, 3]).build().unwrap();
        let model = boldcast_cpu::CpuModel::<f32>::new(cfg, None, 3).unwrap();
        (ds, model, WindowSpec { window: 12, stride: 4, d_in: 2 })
    }

    #[test]
    fn the_example_is_the_models_forecast_of_the_tr_it_targets() {
        let (ds, model, spec) = setup(1);
        let w = WindowRef { run: 1, start: 8 };
        let ex = forecast_example(&model, &ds, &spec, w, 2).unwrap();
        assert_eq!((ex.run.as_str(), ex.start, ex.parcel.as_str()), ("sub-01_run-2", 8, "parcel-002"));
        let rows = ds.runs[1].rows(0, 40).unwrap();
        assert_eq!(ex.truth, (8..20).map(|t| rows[t * 3 + 2]).collect::<Vec<_>>());
        // The same window in a batch of two: token t, horizon index i, element j targets
        // TR (t + h) D + j of the window.
        let pred = model.forward(&ds.tokens::<f32>(&[WindowRef { run: 0, start: 0 }, w], &spec).unwrap()).unwrap();
        for (i, (f, h)) in ex.forecasts.iter().zip([1, 3]).enumerate() {
            assert_eq!(f.horizon, h);
            assert_eq!(f.tr, (2 * h..12).collect::<Vec<_>>(), "6 tokens: t = 0 ..= 5 - h");
            for (k, (&tr, &v)) in f.tr.iter().zip(&f.value).enumerate() {
                let (t, j) = (k / 2, k % 2);
                assert_eq!(tr, (t + h) * 2 + j);
                assert!((v - f64::from(pred.at(1, t, 2, i, j))).abs() < 1e-6, "{v}");
            }
        }
    }

    #[test]
    fn the_best_baselines_forecast_the_same_trs_as_the_model() {
        let (ds, model, spec) = setup(2);
        let b = boldcast_baselines::fit_baselines(&ds, &[0, 1], &[1, 3], &spec).unwrap();
        let w = WindowRef { run: 3, start: 8 };
        let mut ex = forecast_example(&model, &ds, &spec, w, 2).unwrap();
        let best = ["ar1_iterated".to_string(), "no_such_row".to_string()];
        add_best_baselines(&mut ex, (&b, &best), (&ds, &spec), w, 2).unwrap();
        assert_eq!(ex.best_baselines.len(), 1, "an unknown name is left out");
        let f = &ex.best_baselines[0];
        assert_eq!((f.name.as_str(), f.forecast.horizon), ("ar1_iterated", 1));
        assert_eq!(f.forecast.tr, ex.forecasts[0].tr);
        // The iterated AR(1) at horizon 1: phi^L times the token's last TR, L = j + 1.
        let rows = ds.runs[3].rows(8, 20).unwrap();
        let phi = b.ar1_phi[2];
        for (&tr, &v) in f.forecast.tr.iter().zip(&f.forecast.value) {
            let (t, j) = (tr / 2 - 1, tr % 2);
            let want = phi.powi(j as i32 + 1) * rows[(t * 2 + 1) * 3 + 2];
            assert!((v - want).abs() < 1e-9, "TR {tr}: {v} vs {want}");
        }
    }
}
