//! The checkpoint directory through the library: round trip, pruning to two, the `latest`
//! pointer and its fallback, and errors naming the file.

use boldcast::core::model::NamedTensor;
use boldcast::core::optim::Moments;
use boldcast::core::{Adjacency, ModelConfig};
use boldcast_train::checkpoint::{
    config_hash, latest_checkpoint, load_checkpoint, write_checkpoint, CheckpointData, RngState, TrainState, ValState,
    STATE_FORMAT,
};
use boldcast_train::data::DataIdentity;

fn cfg() -> ModelConfig {
    ModelConfig::smallest(&[1, 5]).unwrap()
}

fn state(step: u64) -> TrainState {
    let config = "preset = \"quick\"\n".to_string();
    TrainState {
        format: STATE_FORMAT.into(),
        step,
        max_steps: 100,
        optimizer_t: step,
        next_lr: 1e-3 / 3.0,
        epoch: step / 7,
        position_in_epoch: step % 7,
        batches_per_epoch: 7,
        train_windows: 30,
        rng: RngState { algorithm: "ChaCha8Rng".into(), seed: 3, stream: (1 << 32) + step / 7, word_pos: "64".into() },
        val: ValState {
            history: vec![(0, 1.0 / 3.0), (10, 0.1 + 0.2)],
            best: Some((10, 0.1 + 0.2)),
            patience_ref: Some(0.1 + 0.2),
            bad_validations: 0,
            train_losses_since_val: vec![std::f64::consts::PI, 1e-300],
        },
        log_bytes: 1234,
        log_hash: Some("0123456789abcdef".into()),
        finished: None,
        config_hash: config_hash(&config),
        config,
        files: None,
        data: Some(identity()),
    }
}

fn identity() -> DataIdentity {
    DataIdentity {
        parcels: (0..4).map(|p| format!("p{p}")).collect(),
        fingerprint: "0123456789abcdef".into(),
        provenance: None,
    }
}

#[test]
fn round_trip_pruning_and_the_latest_pointer() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path();
    let specs = cfg().param_specs();
    let params: Vec<NamedTensor<f32>> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| NamedTensor {
            name: s.name.clone(),
            shape: s.shape.clone(),
            data: (0..s.numel()).map(|j| (i * 10 + j) as f32 / 7.0).collect(),
        })
        .collect();
    let moments: Vec<Moments<f32>> = params
        .iter()
        .map(|p| Moments { m: p.data.iter().map(|x| x * 0.5).collect(), v: p.data.iter().map(|x| x * x).collect() })
        .collect();
    let adj = Adjacency::ring(4, 3).unwrap();
    for step in [10, 20, 30] {
        let st = state(step);
        let data = CheckpointData {
            params: params.clone(),
            moments: &moments,
            specs: &specs,
            adjacency: Some(&adj),
            data: &identity(),
            state: &st,
        };
        let mut files = Vec::new();
        let dir = write_checkpoint(out, &data, &mut |p| files.push(p.to_path_buf())).unwrap();
        assert_eq!(dir, out.join(format!("checkpoints/step-{step:06}")));
        // Each file is announced in the temporary directory, in the order written.
        let tmp = out.join(format!("checkpoints/.step-{step:06}.tmp"));
        let want = ["model.safetensors", "optimizer.safetensors", "state.json"].map(|f| tmp.join(f));
        assert_eq!(files, want);
    }
    assert_eq!(crate::common::ls(&out.join("checkpoints")), ["latest", "step-000020", "step-000030"]);
    let l = load_checkpoint(&latest_checkpoint(out).unwrap().unwrap(), &specs).unwrap();
    assert!(l.state.files.is_some(), "the write records the tensor files' hashes");
    assert_eq!(TrainState { files: None, ..l.state.clone() }, state(30), "floats in state.json come back exactly");
    assert_eq!(l.moments, moments);
    assert_eq!(l.adjacency, Some(adj));
    let mut got = l.params.clone();
    got.sort_by(|a, b| a.name.cmp(&b.name));
    let mut want = params.clone();
    want.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(got, want);
    // The model file holds exactly the MODEL.md names; the moments are m.<name> / v.<name>.
    let f = boldcast::storage::tensorfile::SafetensorsFile::open(out.join("checkpoints/step-000030/model.safetensors"))
        .unwrap();
    assert_eq!(f.names().len(), specs.len());
    let o =
        boldcast::storage::tensorfile::SafetensorsFile::open(out.join("checkpoints/step-000030/optimizer.safetensors"))
            .unwrap();
    assert!(o.contains("m.head.weight") && o.contains("v.embed_proj.bias") && o.names().len() == 2 * specs.len());

    // A dangling or missing pointer falls back to the newest complete directory.
    std::fs::write(out.join("checkpoints/latest"), "step-000099\n").unwrap();
    assert_eq!(latest_checkpoint(out).unwrap().unwrap(), out.join("checkpoints/step-000030"));
    std::fs::remove_file(out.join("checkpoints/latest")).unwrap();
    assert_eq!(latest_checkpoint(out).unwrap().unwrap(), out.join("checkpoints/step-000030"));
    assert!(latest_checkpoint(&out.join("nothing")).unwrap().is_none());

    // An altered state is refused, naming the file.
    let sp = out.join("checkpoints/step-000020/state.json");
    let text = std::fs::read_to_string(&sp).unwrap().replace("preset = \\\"quick\\\"", "preset = \\\"laptop\\\"");
    std::fs::write(&sp, text).unwrap();
    let e = load_checkpoint(&out.join("checkpoints/step-000020"), &specs).unwrap_err().to_string();
    assert!(e.contains("step-000020/state.json") && e.contains("config_hash"), "{e}");
    // A moment of the wrong shape is refused, naming the tensor.
    let other = cfg().into_builder().d_model(3).build().unwrap().param_specs();
    let e = load_checkpoint(&out.join("checkpoints/step-000030"), &other).unwrap_err().to_string();
    assert!(e.contains("optimizer.safetensors") && e.contains("m."), "{e}");
}
