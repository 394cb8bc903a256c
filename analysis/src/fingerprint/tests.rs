//! Fingerprinting on synthetic subjects whose identity is planted (each its own VAR(1)
//! coupling, `boldcast_fixtures::IdentitySpec`), and on identical subjects (the null).

use super::*;
use boldcast_baselines::stats::{self, clopper_pearson};
use boldcast_fixtures::{IdentitySpec, Layout};

fn dataset(spec: &IdentitySpec) -> Dataset {
    Dataset::from_synth(&spec.generate().unwrap(), None).unwrap()
}

fn layout(subjects: usize, runs: usize, seed: u64) -> Layout {
    Layout { subjects, runs, trs: 300, parcels: 12, seed }
}

fn all_runs(ds: &Dataset) -> Vec<usize> {
    (0..ds.runs.len()).collect()
}

/// The FC report of every run of `ds`.
fn fc_report(ds: &Dataset, edges: FcEdges) -> FingerprintReport {
    let (segs, halves) = segments(ds, &all_runs(ds)).unwrap();
    let fc = fc_samples(&segs, edges);
    fingerprint(&[Method::new("fc", &fc, Similarity::Pearson)], halves).unwrap()
}

#[test]
fn the_fc_fingerprint_finds_planted_identities() {
    for seed in 1..4 {
        let ds = dataset(&IdentitySpec::planted(layout(10, 2, seed)));
        for edges in [FcEdges::FisherZ, FcEdges::Pearson] {
            let r = fc_report(&ds, edges);
            let m = &r.methods[0];
            assert!(!r.halves && r.mcnemar.is_none());
            assert_eq!((m.n_queries, m.n_subjects, m.matrix.len(), m.labels[1].as_str()), (20, 10, 20, "sub-01_run-2"));
            assert!(m.top1.value >= 0.9, "seed {seed} {edges:?}: top-1 {}", m.top1.value);
            assert!(m.top1.clopper_pearson.lo > 0.6, "{:?}", m.top1.clopper_pearson);
            assert!(m.top5.value >= m.top1.value);
            // Each query's gallery: 19 runs, one its subject's.
            assert!((m.top1.chance - 1.0 / 19.0).abs() < 1e-12 && (m.top5.chance - 5.0 / 19.0).abs() < 1e-12);
        }
    }
}

#[test]
fn identical_subjects_give_chance() {
    // Over 5 seeds, 100 queries: the pooled hits' 99 % Clopper-Pearson interval holds chance
    // (1/19 at top-1, 5/19 at top-5) and stays far below the planted accuracy.
    let (mut k1, mut k5, mut n) = (0, 0, 0);
    for seed in 1..6 {
        let m = fc_report(&dataset(&IdentitySpec::identical(layout(10, 2, seed))), FcEdges::FisherZ).methods.remove(0);
        (k1, k5, n) = (k1 + m.top1.correct, k5 + m.top5.correct, n + m.n_queries);
    }
    let (i1, i5) = (clopper_pearson(k1, n, 0.99), clopper_pearson(k5, n, 0.99));
    assert!(i1.lo <= 1.0 / 19.0 && 1.0 / 19.0 <= i1.hi && i1.hi < 0.3, "top-1 {k1}/{n}: {i1:?}");
    assert!(i5.lo <= 5.0 / 19.0 && 5.0 / 19.0 <= i5.hi && i5.hi < 0.6, "top-5 {k5}/{n}: {i5:?}");
}

#[test]
fn one_run_per_subject_is_split_into_halves() {
    let ds = dataset(&IdentitySpec::planted(layout(10, 1, 4)));
    let r = fc_report(&ds, FcEdges::FisherZ);
    let m = &r.methods[0];
    assert!(r.halves && r.note.contains("split into halves"), "{}", r.note);
    assert_eq!((m.n_queries, m.labels[0].as_str()), (20, "sub-01_run-1 (first half)"));
    assert!(m.top1.value >= 0.9, "top-1 {} on halves of 150 TRs", m.top1.value);
    let b = m.top1.bootstrap;
    assert!(b.lo <= m.top1.value && m.top1.value <= b.hi && b.hi <= 1.0, "{b:?}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["halves"], true);
    assert_eq!(json["methods"][0]["similarity"], "pearson");
    assert_eq!(json["methods"][0]["top1"]["clopper_pearson"]["level"], 0.95);
}

#[test]
fn mcnemar_pairs_two_methods_on_the_same_queries() {
    let ds = dataset(&IdentitySpec::planted(layout(10, 2, 1)));
    let segs = whole_runs(&ds, &all_runs(&ds)).unwrap();
    let full = fc_samples(&segs, FcEdges::FisherZ);
    // The FC of the first 20 TRs only: a noisy fingerprint of the same runs.
    let short: Vec<Segment> =
        segs.iter().map(|s| Segment { n_tr: 20, data: s.data[..20 * s.parcels].to_vec(), ..s.clone() }).collect();
    let short = fc_samples(&short, FcEdges::FisherZ);
    let methods = [Method::new("fc", &full, Similarity::Pearson), Method::new("fc-20", &short, Similarity::Pearson)];
    let r = fingerprint(&methods, false).unwrap();
    let t = r.mcnemar.clone().unwrap();
    let (a, b) = (&r.methods[0].top1, &r.methods[1].top1);
    assert_eq!(t.methods, ["fc".to_string(), "fc-20".to_string()]);
    assert_eq!((t.both + t.only_first, t.both + t.only_second), (a.correct, b.correct));
    assert_eq!(t.both + t.only_first + t.only_second + t.neither, 20);
    assert!(b.correct < a.correct, "20 TRs identify fewer: {} vs {}", b.correct, a.correct);
    assert_eq!(t.p_value, stats::mcnemar_exact(t.only_first, t.only_second));
    // Queries that differ are an error, not a pairing.
    let fewer = [Method::new("fc", &full, Similarity::Pearson), Method::new("half", &short[..10], Similarity::Pearson)];
    assert!(fingerprint(&fewer, false).unwrap_err().to_string().contains("did not score the same queries"));
}

/// Each segment's embedding by `model`, pooled (mean) over its tokens: `(P, M)` flattened.
fn pooled_embeddings(model: &impl boldcast_core::Model<f32>, segs: &[Segment], d_in: usize) -> Vec<Sample> {
    use boldcast_core::{TokenShape, Tokens};
    segs.iter()
        .map(|s| {
            let (t, p) = (s.n_tr / d_in, s.parcels);
            let shape = TokenShape { batch: 1, time: t, parcels: p, d_in };
            let mut tok = Tokens::<f32>::zeros(shape);
            for (row, x) in s.data[..t * d_in * p].chunks(p).enumerate() {
                for (q, v) in x.iter().enumerate() {
                    let i = tok.index(0, row / d_in, q, row % d_in);
                    tok.data_mut()[i] = *v as f32;
                }
            }
            let e = model.embed(&tok).unwrap();
            let m = e.shape().d_model;
            let mut f = vec![0.0f64; p * m];
            for (i, v) in e.data().iter().enumerate() {
                f[i % (p * m)] += *v as f64 / t as f64;
            }
            Sample { subject: s.subject.clone(), label: s.label.clone(), features: f }
        })
        .collect()
}

/// The one-layer model of the embedding tests, untrained.
fn small_model(seed: u64) -> boldcast_cpu::CpuModel<f32> {
    let cfg = boldcast_core::ModelConfig::builder()
        .d_in(4)
        .d_model(16)
        .n_layers(1)
        .d_state(8)
        .expand(2)
        .d_conv(4)
        .k_neighbors(0)
        .horizons(&[1])
        .build()
        .unwrap();
    boldcast_cpu::CpuModel::<f32>::new(cfg, None, seed).unwrap()
}

/// The correlation-pooled embedding report (against FC) of every run of `ds`.
fn corr_report(model: &boldcast_cpu::CpuModel<f32>, ds: &Dataset) -> FingerprintReport {
    let ctx = crate::infer::Context { len: crate::infer::ContextLen::Last(16), stride: 1, batch: 64 };
    model::fingerprint_model(
        model,
        ds,
        &all_runs(ds),
        (&ctx, crate::infer::Pool::Corr).into(),
        None,
        &Relatives::none(),
    )
    .unwrap()
}

#[test]
fn correlation_pooled_embeddings_find_planted_identities_and_not_identical_ones() {
    // The parcel-by-parcel correlation of even an untrained model's embeddings carries the
    // coupling of the BOLD it is given (the model module documents why, and what the mean
    // pooling gives instead): 20 of 20 on each seed here; on identical subjects it must stay
    // at chance (it found 1, 3 and 1 of 20).
    let model = small_model(1);
    let (mut same, mut n) = (0, 0);
    for seed in 1..4 {
        let r = corr_report(&model, &dataset(&IdentitySpec::planted(layout(10, 2, seed))));
        let e = &r.methods[0];
        assert_eq!(
            (e.name.as_str(), e.pooling, e.similarity),
            ("embedding", Some(crate::infer::Pool::Corr), Similarity::Pearson)
        );
        assert_eq!(e.n_queries, 20);
        assert!(e.top1.value >= 0.9, "seed {seed}: top-1 {}", e.top1.value);
        let z = corr_report(&model, &dataset(&IdentitySpec::identical(layout(10, 2, seed)))).methods.remove(0);
        (same, n) = (same + z.top1.correct, n + z.n_queries);
    }
    let i = clopper_pearson(same, n, 0.99);
    assert!(i.lo <= 1.0 / 19.0 && 1.0 / 19.0 <= i.hi && i.hi < 0.35, "identical: top-1 {same}/{n}: {i:?}");
    // One run per subject: halves of 150 TRs (37 tokens of 4 TRs; 20 of 20 found).
    let h = corr_report(&model, &dataset(&IdentitySpec::planted(layout(10, 1, 4))));
    assert!(h.halves && h.methods[0].top1.value >= 0.9, "halves: top-1 {}", h.methods[0].top1.value);
    let ds = dataset(&IdentitySpec::planted(layout(2, 2, 1)));
    let ctx = crate::infer::Context { len: crate::infer::ContextLen::Full, stride: 1, batch: 1 };
    let e = model::fingerprint_model(
        &model,
        &ds,
        &all_runs(&ds),
        (&ctx, crate::infer::Pool::None).into(),
        None,
        &Relatives::none(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("pooling `none` keeps every token"), "{e}");
    let json = serde_json::to_value(corr_report(&model, &dataset(&IdentitySpec::planted(layout(4, 2, 1))))).unwrap();
    assert_eq!(
        (&json["methods"][0]["pooling"], &json["methods"][1]["pooling"]),
        (&"corr".into(), &serde_json::Value::Null)
    );
    assert!(json["methods"][0]["features"].as_str().unwrap().contains("correlation of the final-norm embeddings"));
}

#[test]
fn mean_pooled_embeddings_run_end_to_end_and_fc_beats_them() {
    // An untrained model's mean-pooled embeddings carry no identity: over seeds 1, 2, 3 of
    // this layout they reached top-1 0.05, 0.25 and 0.00 (chance 1/19), so only the path and
    // the paired test are asserted here. Briefly trained (200 AdamW steps at lr 3e-3 on the 80
    // windows of 64 TRs of these runs, loss 1.31 to 0.945, with k = 0 or 4 ring neighbours)
    // they reached 0.05 to 0.25, and the `quick` model trained 600 steps 0 of 20 (the model
    // module's table): the mean is not a fingerprint, the correlation pooling is (above).
    let model = small_model(1);
    let ds = dataset(&IdentitySpec::planted(layout(10, 2, 1)));
    let segs = whole_runs(&ds, &all_runs(&ds)).unwrap();
    let emb = pooled_embeddings(&model, &segs, 4);
    assert_eq!(emb[0].features.len(), 12 * 16, "(P, M) flattened");
    let fc = fc_samples(&segs, FcEdges::FisherZ);
    let methods = [Method::new("embedding", &emb, Similarity::Cosine), Method::new("fc", &fc, Similarity::Pearson)];
    let r = fingerprint(&methods, false).unwrap();
    let (e, f, t) = (&r.methods[0].top1, &r.methods[1].top1, r.mcnemar.unwrap());
    assert_eq!((e.correct, f.correct), (1, 20), "the measured values of the comment above");
    // Only the FC identifies 19 queries: p = 2 / 2^19.
    assert_eq!((t.only_first, t.only_second, t.both), (0, 19, 1));
    assert!((t.p_value - 2.0 / 2f64.powi(19)).abs() < 1e-15, "{}", t.p_value);
}

#[test]
fn first_segments_of_runs_are_identified_across_runs_and_bad_lengths_are_refused() {
    let model = small_model(1);
    let ds = dataset(&IdentitySpec::planted(layout(10, 2, 1)));
    let ctx = crate::infer::Context { len: crate::infer::ContextLen::Full, stride: 1, batch: 1 };
    let fp = |n| {
        model::fingerprint_model(
            &model,
            &ds,
            &all_runs(&ds),
            (&ctx, crate::infer::Pool::Corr).into(),
            Some(n),
            &Relatives::none(),
        )
    };
    let r = fp(100).unwrap();
    assert_eq!((r.segment_trs, r.halves, r.samples.as_str()), (Some(100), false, "the first 100 TRs of each run"));
    assert!(r.note.contains("never from its own run"), "{}", r.note);
    for m in &r.methods {
        assert_eq!((m.n_queries, m.labels[1].as_str()), (20, "sub-01_run-2 (first 100 TRs)"));
        // Every query's gallery holds only other runs: its own run gives one sample.
        assert!((m.top1.chance - 1.0 / 19.0).abs() < 1e-12);
        let s = &m.separation;
        assert!(s.idiff > 0.0 && s.idiff_bootstrap.lo <= s.idiff && s.idiff <= s.idiff_bootstrap.hi, "{s:?}");
        assert_eq!((s.same_pairs, s.other_pairs), (10, 180));
    }
    // The same runs' FC from their first 100 TRs is the FC of those TRs, by hand.
    let seg = first_trs(&ds, &[0], 100).unwrap();
    let fc = fc_samples(&seg, FcEdges::FisherZ);
    let fc2 = fc_samples(&first_trs(&ds, &[1], 100).unwrap(), FcEdges::FisherZ);
    let want = Similarity::Pearson.between(&fc[0].features, &fc2[0].features);
    assert!((r.methods[1].matrix[0][1] - want).abs() < 1e-12);
    // d_in 4: 3 tokens are 12 TRs; the runs have 300.
    let e = fp(11).unwrap_err().to_string();
    assert!(e.contains("--segment 11: the model needs at least 12 TRs (3 tokens of d_in = 4 TRs"), "{e}");
    assert!(fp(12).is_ok());
    let e = fp(301).unwrap_err().to_string();
    assert!(e.contains("--segment 301: longer than the shortest run, sub-01_run-1 (300 TRs)"), "{e}");
    let one = dataset(&IdentitySpec::planted(layout(3, 1, 1)));
    let e = model::fingerprint_model(
        &model,
        &one,
        &all_runs(&one),
        (&ctx, crate::infer::Pool::Corr).into(),
        Some(50),
        &Relatives::none(),
    );
    assert!(e.unwrap_err().to_string().contains("no subject has two runs"));
}
