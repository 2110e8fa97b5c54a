//! Choosing a server of a group: smooth weighted round robin and least
//! connections. Pure functions over weights and counts, so the sequences
//! they produce are tested exactly.

/// Smooth weighted round robin, nginx's algorithm
/// (`ngx_http_upstream_get_peer`): each pick adds every eligible server's
/// weight to its running score, takes the highest score and subtracts the
/// total weight from it. Weights 5:1:1 give `a a b a c a a`, not
/// `a a a a a b c`: a heavy server never gets a burst.
///
/// One per worker and group (no sharing, no locks); servers that are not
/// eligible for a pick keep their score, as in nginx.
#[derive(Debug, Clone)]
pub(crate) struct SmoothWrr {
    score: Vec<i64>,
}

impl SmoothWrr {
    /// State for `servers` servers, all scores zero.
    pub(crate) fn new(servers: usize) -> Self {
        SmoothWrr {
            score: vec![0; servers],
        }
    }

    /// The next server among those for which `eligible(i)` holds, or `None`
    /// when there is none. `weights[i]` is server i's weight (at least 1).
    pub(crate) fn pick(
        &mut self,
        weights: &[u32],
        eligible: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        for (i, &weight) in weights.iter().enumerate() {
            if !eligible(i) {
                continue;
            }
            let Some(score) = self.score.get_mut(i) else {
                continue;
            };
            *score += i64::from(weight);
            total += i64::from(weight);
            if best.is_none_or(|b| self.score[i] > self.score[b]) {
                best = Some(i);
            }
        }
        let chosen = best?;
        self.score[chosen] -= total;
        Some(chosen)
    }
}

/// Least connections: the eligible server with the fewest requests in
/// flight relative to its weight (`in_flight / weight`, compared by cross
/// multiplication as nginx does); ties go to the weighted round robin, so
/// an idle group still spreads by weight.
pub(crate) fn least_conn(
    wrr: &mut SmoothWrr,
    weights: &[u32],
    in_flight: impl Fn(usize) -> usize,
    eligible: impl Fn(usize) -> bool,
) -> Option<usize> {
    let load = |i: usize, weight_of_other: u32| in_flight(i) as u128 * u128::from(weight_of_other);
    let mut best: Option<usize> = None;
    for i in (0..weights.len()).filter(|&i| eligible(i)) {
        if best.is_none_or(|b| load(i, weights[b]) < load(b, weights[i])) {
            best = Some(i);
        }
    }
    let best = best?;
    // Counts move under our feet (other workers); if the tie set changed
    // and lost `best`, `best` itself is still a fine answer.
    wrr.pick(weights, |i| {
        eligible(i) && load(i, weights[best]) == load(best, weights[i])
    })
    .or(Some(best))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(weights: &[u32], n: usize, eligible: impl Fn(usize) -> bool + Copy) -> Vec<usize> {
        let mut wrr = SmoothWrr::new(weights.len());
        (0..n)
            .map(|_| wrr.pick(weights, eligible).expect("an eligible server"))
            .collect()
    }

    #[test]
    fn weights_interleave_like_nginx() {
        // The sequence nginx documents for weights 5, 1, 1.
        assert_eq!(sequence(&[5, 1, 1], 7, |_| true), [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn equal_weights_alternate() {
        assert_eq!(sequence(&[1, 1, 1], 6, |_| true), [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn three_to_one_never_bursts_more_than_three() {
        let picks = sequence(&[3, 1], 400, |_| true);
        let first = picks.iter().filter(|&&i| i == 0).count();
        assert_eq!(first, 300);
        assert_eq!(&picks[..4], &[0, 0, 1, 0]);
        let longest_run = picks
            .chunk_by(|a, b| a == b)
            .map(<[usize]>::len)
            .max()
            .unwrap_or(0);
        assert!(longest_run <= 3, "run of {longest_run}");
    }

    #[test]
    fn ineligible_servers_are_skipped() {
        assert_eq!(sequence(&[1, 1, 1], 4, |i| i != 1), [0, 2, 0, 2]);
    }

    #[test]
    fn nothing_eligible_is_none() {
        let mut wrr = SmoothWrr::new(2);
        assert_eq!(wrr.pick(&[1, 1], |_| false), None);
        let mut wrr = SmoothWrr::new(0);
        assert_eq!(wrr.pick(&[], |_| true), None);
    }

    #[test]
    fn least_conn_takes_the_least_loaded() {
        let mut wrr = SmoothWrr::new(3);
        let in_flight = [4, 1, 2];
        let pick = least_conn(&mut wrr, &[1, 1, 1], |i| in_flight[i], |_| true);
        assert_eq!(pick, Some(1));
    }

    #[test]
    fn least_conn_weighs_load() {
        // 4 in flight on weight 4 (ratio 1) beats 2 on weight 1 (ratio 2).
        let mut wrr = SmoothWrr::new(2);
        let in_flight = [4, 2];
        let pick = least_conn(&mut wrr, &[4, 1], |i| in_flight[i], |_| true);
        assert_eq!(pick, Some(0));
    }

    #[test]
    fn least_conn_ties_follow_weighted_round_robin() {
        let mut wrr = SmoothWrr::new(3);
        let picks: Vec<_> = (0..6)
            .map(|_| least_conn(&mut wrr, &[2, 1, 1], |_| 0, |_| true))
            .collect();
        assert_eq!(
            picks,
            [Some(0), Some(1), Some(2), Some(0), Some(0), Some(1)]
        );
    }

    #[test]
    fn least_conn_ties_only_among_the_least_loaded() {
        let mut wrr = SmoothWrr::new(3);
        let in_flight = [0, 5, 0];
        let picks: Vec<_> = (0..4)
            .map(|_| least_conn(&mut wrr, &[1, 1, 1], |i| in_flight[i], |_| true))
            .collect();
        assert_eq!(picks, [Some(0), Some(2), Some(0), Some(2)]);
    }

    #[test]
    fn least_conn_skips_ineligible() {
        let mut wrr = SmoothWrr::new(2);
        let in_flight = [0, 9];
        let pick = least_conn(&mut wrr, &[1, 1], |i| in_flight[i], |i| i == 1);
        assert_eq!(pick, Some(1));
        assert_eq!(least_conn(&mut wrr, &[1, 1], |_| 0, |_| false), None);
    }
}
