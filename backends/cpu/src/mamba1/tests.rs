//! Unit tests of the pieces the public API hides: the parameter order, the block split, the
//! chunk length, and the checkpointed backward's independence of its chunk length.

use super::*;
use boldcast_core::ModelConfig;

/// A deterministic pseudo-random value in `[lo, hi)` (a small LCG, enough for test data).
fn fill(v: &mut [f64], seed: &mut u64, lo: f64, hi: f64) {
    for x in v {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *x = lo + (hi - lo) * ((*seed >> 11) as f64 / (1u64 << 53) as f64);
    }
}

fn random_params(dims: Mamba1Dims, seed: &mut u64) -> Mamba1Params<Vec<f64>> {
    let mut p = Mamba1Params::zeros(dims);
    for (name, t) in p.view_mut().named() {
        let (lo, hi) = match name {
            "dt_proj.bias" => (-3.0, 0.5),
            "A_log" => (-1.0, 1.5),
            _ => (-0.6, 0.6),
        };
        fill(t, seed, lo, hi);
    }
    p
}

#[test]
fn tensors_follow_the_parameter_specs() {
    let mut c = ModelConfig::boldcast_demo();
    c.d_model = 40; // R = 3, so every width differs
    c.d_state = 5;
    c.d_conv = 3;
    let dims = Mamba1Dims::from_config(&c);
    assert_eq!(dims, Mamba1Dims { d_model: 40, d_inner: 80, d_state: 5, dt_rank: 3, d_conv: 3 });
    let p = Mamba1Params::<Vec<f32>>::zeros(dims);
    let specs: Vec<_> = c.param_specs().into_iter().filter(|s| s.name.starts_with("layers.0.mamba.mamba.")).collect();
    let ours = p.view().named();
    assert_eq!(specs.len(), ours.len());
    for (spec, (name, t)) in specs.iter().zip(ours) {
        assert_eq!(spec.name, format!("layers.0.mamba.mamba.{name}"));
        assert_eq!(spec.numel(), t.len(), "{name}");
    }
    let mut q = p.clone();
    let names: Vec<_> = q.view_mut().named().iter().map(|(n, _)| *n).collect();
    assert_eq!(names, p.view().named().iter().map(|(n, _)| *n).collect::<Vec<_>>());
}

#[test]
fn blocks_partition_the_sequences() {
    for n in [0, 1, 2, 7, 31, 32, 33, 256, 1000] {
        let b = blocks(n);
        assert_eq!(b.len(), n.clamp(1, MAX_BLOCKS));
        assert_eq!(b[0].start, 0);
        assert_eq!(b.last().unwrap().end, n);
        for w in b.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert!(w[0].start < w[0].end);
        }
    }
}

#[test]
fn channel_groups_are_whole_blocks_in_order() {
    use super::scan::{groups, GROUP};
    use crate::ops::simd::LANES;
    assert_eq!(GROUP % LANES, 0);
    for di in [1, 7, 16, 37, 80, 128, 130] {
        let g: Vec<_> = groups(di).collect();
        assert_eq!(g.first().map(|x| x.0), Some(0), "di {di}");
        assert_eq!(g.last().map(|x| x.1), Some(di), "di {di}");
        for w in g.windows(2) {
            assert_eq!(w[0].1, w[1].0, "di {di}: groups must tile the channels in order");
        }
        for (i, &(c0, c1)) in g.iter().enumerate() {
            assert!(c0 % LANES == 0 && c1 > c0 && c1 - c0 <= GROUP, "di {di}: group {c0}..{c1}");
            assert!(i + 1 == g.len() || c1 - c0 == GROUP, "di {di}: only the last group may be short");
        }
    }
}

#[test]
fn chunks_are_the_largest_power_of_two_whose_states_fit_the_cache_budget() {
    let demo = Mamba1Dims { d_model: 64, d_inner: 128, d_state: 16, dt_rank: 4, d_conv: 4 };
    let big = Mamba1Dims { d_model: 128, d_inner: 256, d_state: 16, dt_rank: 8, d_conv: 4 };
    // cpu-demo, f32: 2 * 8 steps * 16 * 128 * 4 bytes = 128 KiB, exactly the budget.
    assert_eq!(scan_chunk(demo, 256, 4), 8);
    assert_eq!(scan_chunk(demo, 256, 8), 4);
    assert_eq!(scan_chunk(big, 256, 4), 4);
    // Small states: at most 32 steps (the gradient-summing blocks), at most T.
    let tiny = Mamba1Dims { d_model: 4, d_inner: 8, d_state: 4, dt_rank: 1, d_conv: 4 };
    assert_eq!(scan_chunk(tiny, 1000, 4), 32);
    assert_eq!(scan_chunk(tiny, 5, 4), 5);
    assert_eq!(scan_chunk(tiny, 0, 4), 1);
    // Huge states: one step per chunk.
    let huge = Mamba1Dims { d_model: 1024, d_inner: 4096, d_state: 64, dt_rank: 64, d_conv: 4 };
    assert_eq!(scan_chunk(huge, 256, 4), 1);
    assert_eq!(checkpoint_bytes::<f32>(demo, Seqs::new(4, 256, 64)), 4 * 64 * 32 * 16 * 128 * 4);
    // The projections: in_proj's 2 Di and x_proj's R + 2N values per step.
    assert_eq!(projection_bytes::<f32>(demo, Seqs::new(4, 256, 64)), 4 * 64 * 256 * (256 + 36) * 4);
    let both = Keep { projections: true };
    assert_eq!(kept_bytes::<f32>(demo, Seqs::new(4, 256, 64), both), (32 * 16 * 128 + 256 * 292) * 4 * 256);
}

/// What the forward leaves (the checkpoints, with or without the projections) is what the
/// backward would recompute, so the backward from it gives the same bits; the forward's
/// output is unchanged by keeping it. f32, 37 channels (full 16-lane blocks and a
/// remainder), T not a multiple of Q.
#[test]
fn backward_from_what_the_forward_kept_is_the_plain_backward() {
    let dims = Mamba1Dims { d_model: 6, d_inner: 37, d_state: 5, dt_rank: 2, d_conv: 4 };
    let (batch, time, parcels) = (2, 45, 3);
    let mut seed = 5;
    let p64 = random_params(dims, &mut seed);
    let mut p = Mamba1Params::<Vec<f32>>::zeros(dims);
    for ((_, dst), (_, src)) in p.view_mut().named().into_iter().zip(p64.view().named()) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s as f32;
        }
    }
    let len = batch * time * parcels * dims.d_model;
    let mut buf = vec![0.0; 2 * len];
    fill(&mut buf, &mut seed, -1.5, 1.5);
    let u: Vec<f32> = buf[..len].iter().map(|&v| v as f32).collect();
    let g_y: Vec<f32> = buf[len..].iter().map(|&v| v as f32).collect();
    let q = scan_chunk(dims, time, 4);
    assert!(q < time && time % q != 0, "Q = {q}: several chunks, the last one partial");

    let seqs = Seqs::new(batch, time, parcels);
    let mut y_plain = vec![0.0f32; len];
    forward(dims, &p, &u, seqs, &mut y_plain);
    let run = |ck: Option<&ScanCheckpoints<f32>>| {
        let mut g_u = vec![0.0f32; len];
        let mut grads = Mamba1Params::zeros(dims);
        let io = BackwardIo { u: &u, g_y: &g_y, g_u: &mut g_u };
        backward(dims, &p, seqs, io, &mut grads, ck);
        (g_u, grads)
    };
    let plain = run(None);
    assert!(plain.0.iter().all(|v| v.is_finite()) && plain.0.iter().any(|&v| v != 0.0));

    for keep in [Keep { projections: false }, Keep { projections: true }] {
        let mut y_kept = vec![0.0f32; len];
        let ck = forward_keeping(dims, &p, (&u, &mut y_kept), seqs, keep, Vec::new());
        assert!(y_plain == y_kept, "keeping {keep:?} changed the forward");
        assert_eq!(ck.bytes(), kept_bytes::<f32>(dims, seqs, keep));
        // A reused buffer, full of stale values, is overwritten everywhere.
        let stale = vec![f32::NAN; ck.states.len()];
        let again = forward_keeping(dims, &p, (&u, &mut y_kept), seqs, keep, stale);
        assert!(again.states == ck.states);
        assert!(run(Some(&ck)) == plain, "the backward from what the forward kept ({keep:?}) differs");

        // Wrong values give a different result (the backward does use them): the states,
        // then (when kept) the projections alone.
        let n_states = checkpoint_bytes::<f32>(dims, seqs) / 4 / seqs.count();
        let per_seq = ck.states.len() / seqs.count();
        for part in [0..n_states, n_states..per_seq] {
            if part.is_empty() {
                continue;
            }
            let mut bad = ck.clone();
            for s in bad.states.chunks_exact_mut(per_seq) {
                s[part.clone()].iter_mut().for_each(|v| *v += 0.25);
            }
            assert!(run(Some(&bad)) != plain, "{keep:?}: values {part:?} are not used");
        }
    }
}

/// The checkpointed backward recomputes exactly the states the forward produced, so the
/// gradients must not depend on the chunk length at all, not even in the last bit: Q = 1
/// (every state checkpointed), Q = T (one chunk recomputed from zero), and chunk boundaries
/// at every other position inside the sequence.
#[test]
fn backward_does_not_depend_on_the_chunk_length() {
    let dims = Mamba1Dims { d_model: 5, d_inner: 7, d_state: 3, dt_rank: 2, d_conv: 3 };
    let (batch, time, parcels) = (2, 23, 2);
    let mut seed = 7;
    let p = random_params(dims, &mut seed);
    let len = batch * time * parcels * dims.d_model;
    let (mut u, mut g_y) = (vec![0.0; len], vec![0.0; len]);
    fill(&mut u, &mut seed, -1.5, 1.5);
    fill(&mut g_y, &mut seed, -1.0, 1.0);
    let run = |q: usize| {
        let mut g_u = vec![f64::NAN; len];
        let mut grads = Mamba1Params::zeros(dims);
        let io = BackwardIo { u: &u, g_y: &g_y, g_u: &mut g_u };
        backward_q(dims, &p.view(), Seqs::new(batch, time, parcels), io, &mut grads.view_mut(), q, None);
        (g_u, grads)
    };
    let reference = run(1);
    assert!(reference.0.iter().all(|v| v.is_finite() && *v != 0.0));
    for q in [2, 3, 4, 5, 7, 11, 22, 23, 40] {
        assert!(run(q) == reference, "Q = {q} differs from Q = 1");
    }
}

/// The same in f32, where a recomputation that differed in any operation would show at once.
/// 37 channels: two full blocks of the kernels' 16 lanes and a remainder of 5, so both code
/// paths of the forward and the recomputation are compared.
#[test]
fn backward_does_not_depend_on_the_chunk_length_f32() {
    let dims = Mamba1Dims { d_model: 4, d_inner: 37, d_state: 4, dt_rank: 1, d_conv: 4 };
    let (batch, time, parcels) = (1, 30, 3);
    let mut seed = 11;
    let p64 = random_params(dims, &mut seed);
    let mut p = Mamba1Params::<Vec<f32>>::zeros(dims);
    for ((_, dst), (_, src)) in p.view_mut().named().into_iter().zip(p64.view().named()) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s as f32;
        }
    }
    let len = batch * time * parcels * dims.d_model;
    let mut buf = vec![0.0; len];
    fill(&mut buf, &mut seed, -1.5, 1.5);
    let u: Vec<f32> = buf.iter().map(|&v| v as f32).collect();
    let g_y: Vec<f32> = u.iter().rev().copied().collect();
    let run = |q: usize| {
        let mut g_u = vec![0.0f32; len];
        let mut grads = Mamba1Params::zeros(dims);
        let io = BackwardIo { u: &u, g_y: &g_y, g_u: &mut g_u };
        backward_q(dims, &p.view(), Seqs::new(batch, time, parcels), io, &mut grads.view_mut(), q, None);
        (g_u, grads)
    };
    let reference = run(1);
    for q in [3, 6, 30] {
        assert!(run(q) == reference, "Q = {q} differs from Q = 1");
    }
}
