//! Ranks as threads of one process: [`ThreadGroup::new`]`(size)` gives one [`Collective`]
//! per rank, to be moved into one thread each. Every operation is an all-gather of the ranks'
//! buffers under a mutex, and each rank reduces the gathered buffers in rank order, so the
//! result is bit-identical on every rank. For tests and for checking the data-parallel
//! arithmetic without MPI; not for speed.

use boldcast_core::{Collective, Error};
use std::sync::{Arc, Condvar, Mutex};

#[derive(Default)]
struct State {
    /// The buffers of the round being gathered, by rank.
    slots: Vec<Option<Vec<u8>>>,
    /// The gathered buffers of the finished round, until every rank has read them.
    result: Option<Arc<Vec<Vec<u8>>>>,
    /// Ranks that have read `result`.
    taken: usize,
    /// Finished rounds.
    round: u64,
}

struct Shared {
    size: usize,
    state: Mutex<State>,
    cv: Condvar,
}

/// One rank of a group of threads.
pub struct ThreadGroup {
    rank: usize,
    shared: Arc<Shared>,
}

impl ThreadGroup {
    /// The `size` ranks of a new group, rank `r` at index `r`.
    pub fn new(size: usize) -> Vec<ThreadGroup> {
        let shared = Arc::new(Shared {
            size,
            state: Mutex::new(State { slots: vec![None; size], ..State::default() }),
            cv: Condvar::new(),
        });
        (0..size).map(|rank| ThreadGroup { rank, shared: shared.clone() }).collect()
    }

    /// Every rank's `data`, by rank, once all of them have called it.
    fn all_gather(&self, data: Vec<u8>) -> Result<Arc<Vec<Vec<u8>>>, Error> {
        let poisoned = |_| Error::Backend("thread group: a rank panicked".into());
        let sh = &self.shared;
        let mut st = sh.state.lock().map_err(poisoned)?;
        // The previous round's result must be read by everyone before a new round starts.
        while st.result.is_some() {
            st = sh.cv.wait(st).map_err(poisoned)?;
        }
        st.slots[self.rank] = Some(data);
        if st.slots.iter().all(Option::is_some) {
            let all: Vec<Vec<u8>> = st.slots.iter_mut().map(|s| s.take().expect("checked")).collect();
            st.result = Some(Arc::new(all));
            st.round += 1;
            sh.cv.notify_all();
        } else {
            let round = st.round;
            while st.round == round {
                st = sh.cv.wait(st).map_err(poisoned)?;
            }
        }
        let out = st.result.clone().expect("set when the round finished");
        st.taken += 1;
        if st.taken == sh.size {
            st.result = None;
            st.taken = 0;
            sh.cv.notify_all();
        }
        Ok(out)
    }
}

macro_rules! reduce {
    ($self:ident, $buf:ident, $t:ty) => {{
        let bytes: Vec<u8> = $buf.iter().flat_map(|v| v.to_le_bytes()).collect();
        let all = $self.all_gather(bytes)?;
        const W: usize = std::mem::size_of::<$t>();
        for (r, b) in all.iter().enumerate() {
            if b.len() != $buf.len() * W {
                return Err(Error::Backend(format!(
                    "all-reduce: rank {r} gave {} values, rank {} {}",
                    b.len() / W,
                    $self.rank,
                    $buf.len()
                )));
            }
        }
        for (i, v) in $buf.iter_mut().enumerate() {
            let mut s: $t = 0.0;
            for b in all.iter() {
                s += <$t>::from_le_bytes(b[i * W..(i + 1) * W].try_into().expect("width"));
            }
            *v = s;
        }
        Ok(())
    }};
}

impl Collective for ThreadGroup {
    fn name(&self) -> &'static str {
        "threads"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<(), Error> {
        reduce!(self, buf, f32)
    }
    fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<(), Error> {
        reduce!(self, buf, f64)
    }
    fn broadcast(&self, buf: &mut [u8], root: usize) -> Result<(), Error> {
        if root >= self.size() {
            return Err(Error::Backend(format!("broadcast from rank {root} of {}", self.size())));
        }
        let all = self.all_gather(buf.to_vec())?;
        if all[root].len() != buf.len() {
            return Err(Error::Backend(format!(
                "broadcast: rank {root} sent {} bytes, rank {} expects {}",
                all[root].len(),
                self.rank,
                buf.len()
            )));
        }
        buf.copy_from_slice(&all[root]);
        Ok(())
    }
    fn barrier(&self) -> Result<(), Error> {
        self.all_gather(Vec::new()).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_core::collective::{broadcast_bytes, check_agreement};

    #[test]
    fn sums_broadcasts_and_agreement_across_three_threads() {
        let ranks = ThreadGroup::new(3);
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = ranks
                .into_iter()
                .map(|c| {
                    s.spawn(move || {
                        let r = c.rank();
                        let mut a = vec![r as f32, 1.0, 0.5 * r as f32];
                        for _ in 0..5 {
                            // Rounds in a row must not mix.
                            c.barrier().unwrap();
                        }
                        c.all_reduce_sum_f32(&mut a).unwrap();
                        let mut d = vec![10.0f64.powi(r as i32)];
                        c.all_reduce_sum_f64(&mut d).unwrap();
                        let mut msg = if r == 2 { b"from two".to_vec() } else { Vec::new() };
                        broadcast_bytes(&c, &mut msg, 2).unwrap();
                        let agree = check_agreement(&c, "x", 5).is_ok();
                        let disagree = check_agreement(&c, "y", r as u64).map_err(|e| e.to_string());
                        (a, d, msg, agree, disagree)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (r, (a, d, msg, agree, disagree)) in out.into_iter().enumerate() {
            assert_eq!(a, [3.0, 3.0, 1.5]);
            assert_eq!(d, [111.0]);
            assert_eq!(msg, b"from two");
            assert!(agree);
            if r == 0 {
                assert!(disagree.is_ok());
            } else {
                let e = disagree.unwrap_err();
                assert!(e.contains(&format!("rank {r} of 3: y differs from rank 0's")), "{e}");
            }
        }
    }
}
