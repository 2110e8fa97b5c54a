//! How sure a ratio is: a percentile bootstrap over rounds.
//!
//! Each side's per-round values (requests/s, p50, p99 of each round) are
//! resampled with replacement, the ratio of the resampled means taken,
//! [`RESAMPLES`] times; the 2.5th and 97.5th percentiles of those ratios
//! are the 95% interval. An interval that contains 1.0 means the rounds
//! do not tell the two apart: "not significant". With fewer than two
//! values on a side there is no interval. The generator is seeded with a
//! constant, so a report renders the same interval every time.

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 2000;

/// A ratio `new / base` with its 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    /// Ratio of the means.
    pub ratio: f64,
    /// 2.5th percentile of the bootstrap ratios.
    pub low: f64,
    /// 97.5th percentile.
    pub high: f64,
}

impl Ratio {
    /// The interval contains 1.0: no difference the rounds can show.
    pub fn significant(&self) -> bool {
        self.low > 1.0 || self.high < 1.0
    }

    /// `1.12x [0.98-1.25] n.s.` as printed in reports.
    pub fn describe(&self) -> String {
        format!(
            "{:.2}x [{:.2}-{:.2}]{}",
            self.ratio,
            self.low,
            self.high,
            if self.significant() { "" } else { " n.s." }
        )
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Relative spread of per-round values: half the range over the mean.
pub fn spread(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let m = mean(v);
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
    (m > 0.0).then(|| (hi - lo) / 2.0 / m)
}

/// The ratio of the means of `new` over `base` with its interval; `None`
/// when a side has fewer than two values or the base mean is not positive.
pub fn ratio(base: &[f64], new: &[f64]) -> Option<Ratio> {
    if base.len() < 2 || new.len() < 2 || mean(base) <= 0.0 {
        return None;
    }
    let mut rng = SplitMix(0x7465_726e_6265_6e63);
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let b = resampled_mean(base, &mut rng);
            (b > 0.0).then(|| resampled_mean(new, &mut rng) / b)
        })
        .collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    Some(Ratio {
        ratio: mean(new) / mean(base),
        low: at(0.025),
        high: at(0.975),
    })
}

fn resampled_mean(v: &[f64], rng: &mut SplitMix) -> f64 {
    let sum: f64 = (0..v.len())
        .map(|_| v[(rng.next() % v.len() as u64) as usize])
        .sum();
    sum / v.len() as f64
}

/// SplitMix64: a small, well-mixed generator; statistical quality is ample
/// for resampling indices, and it needs no dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_rounds_are_not_significant_and_apart_ones_are() {
        let same = ratio(&[100.0, 110.0, 95.0], &[105.0, 98.0, 112.0]).unwrap();
        assert!(!same.significant(), "{same:?}");
        assert!(same.describe().ends_with("n.s."));
        let faster = ratio(&[100.0, 102.0, 98.0], &[150.0, 149.0, 152.0]).unwrap();
        assert!(faster.significant() && faster.low > 1.4, "{faster:?}");
        assert_eq!(ratio(&[1.0], &[2.0, 3.0]), None);
        let itself = ratio(&[3.0, 4.0, 5.0], &[3.0, 4.0, 5.0]).unwrap();
        assert!(itself.low <= 1.0 && itself.high >= 1.0, "{itself:?}");
    }
}
