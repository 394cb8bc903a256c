//! The subject split: which runs are trained on and which are held out.

use crate::dataset::Dataset;
use crate::error::DataError;

impl Dataset {
    /// Splits the runs by subject: the last `val_subjects` subjects in sorted order are held
    /// out. Returns `(train, val)` run indices; at least one subject must stay for training.
    pub fn split_subjects(&self, val_subjects: usize) -> Result<(Vec<usize>, Vec<usize>), DataError> {
        let subjects = self.subjects();
        if val_subjects >= subjects.len() {
            return Err(DataError::config(
                "data.val_subjects",
                val_subjects,
                format!("must leave at least one of the {} subjects for training", subjects.len()),
            ));
        }
        let val = &subjects[subjects.len() - val_subjects..];
        let (mut tr, mut va) = (Vec::new(), Vec::new());
        for (i, r) in self.runs.iter().enumerate() {
            if val.contains(&r.id.subject) {
                va.push(i);
            } else {
                tr.push(i);
            }
        }
        Ok((tr, va))
    }
}

#[cfg(test)]
mod tests {
    use crate::Dataset;

    #[test]
    fn subjects_split_keeps_runs_together() {
        use boldcast_fixtures::{Ar1Spec, Layout};
        let spec = Ar1Spec::new(Layout { subjects: 3, runs: 2, trs: 10, parcels: 2, seed: 1 }, 0.5);
        let ds = Dataset::from_synth(&spec.generate().unwrap(), None).unwrap();
        assert_eq!(ds.subjects(), ["01", "02", "03"]);
        assert_eq!(ds.split_subjects(1).unwrap(), (vec![0, 1, 2, 3], vec![4, 5]));
        assert_eq!(ds.split_subjects(0).unwrap(), (vec![0, 1, 2, 3, 4, 5], vec![]));
        let e = ds.split_subjects(3).unwrap_err().to_string();
        assert!(e.contains("invalid data.val_subjects = 3: must leave at least one of the 3 subjects"), "{e}");
    }
}
