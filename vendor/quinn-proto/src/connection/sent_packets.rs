//! tern patch: the packets of a packet number space that await an
//! acknowledgement, by number (was a `BTreeMap<u64, SentPacket>`).

use std::collections::VecDeque;
use std::ops::{Bound, Index, RangeBounds};

use super::spaces::SentPacket;

/// A deque that shrinks below this capacity only when it is far from full.
const CAPACITY_KEPT: usize = 64;

/// Sent packets by number, oldest first.
///
/// Packet numbers only grow, so a packet is appended at the back, and the
/// usual acknowledgement removes packets at the front. One acknowledged or
/// declared lost while an older one is still tracked leaves a hole (`None`)
/// until every older packet is gone; loss detection removes old packets
/// within about a round trip, so holes do not pile up. A `BTreeMap` moved
/// ~100-byte `SentPacket` values between nodes on most insertions and
/// removals (2-3% of tern's CPU for a 1 MiB HTTP/3 response, perf).
#[derive(Debug, Default)]
pub(super) struct SentPackets {
    packets: VecDeque<(u64, Option<SentPacket>)>,
}

impl SentPackets {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Tracks `packet` as `number`, above every number tracked so far.
    pub(super) fn insert(&mut self, number: u64, packet: SentPacket) {
        debug_assert!(
            self.packets.back().is_none_or(|&(last, _)| last < number),
            "packet numbers only grow"
        );
        self.packets.push_back((number, Some(packet)));
    }

    /// Where `number` is in `packets`, hole or not.
    fn position(&self, number: u64) -> Option<usize> {
        let &(first, _) = self.packets.front()?;
        // Without holes before it, a packet sits at its offset from the
        // first: the usual case, since numbers are consecutive.
        let guess = usize::try_from(number.checked_sub(first)?).ok()?;
        if self.packets.get(guess).is_some_and(|&(n, _)| n == number) {
            return Some(guess);
        }
        let i = self.packets.partition_point(|&(n, _)| n < number);
        (self.packets.get(i)?.0 == number).then_some(i)
    }

    pub(super) fn get(&self, number: &u64) -> Option<&SentPacket> {
        self.packets.get(self.position(*number)?)?.1.as_ref()
    }

    /// Stops tracking `number`, and returns what was known of it.
    pub(super) fn remove(&mut self, number: &u64) -> Option<SentPacket> {
        let i = self.position(*number)?;
        let packet = self.packets[i].1.take()?;
        while matches!(self.packets.front(), Some((_, None))) {
            self.packets.pop_front();
        }
        while matches!(self.packets.back(), Some((_, None))) {
            self.packets.pop_back();
        }
        // An idle connection does not keep a large flight's memory.
        let capacity = self.packets.capacity();
        if capacity > CAPACITY_KEPT && self.packets.len() * 4 <= capacity {
            self.packets
                .shrink_to((self.packets.len() * 2).max(CAPACITY_KEPT));
        }
        Some(packet)
    }

    /// The tracked packets whose numbers are in `range`, in order.
    pub(super) fn range<R: RangeBounds<u64>>(
        &self,
        range: R,
    ) -> impl Iterator<Item = (&u64, &SentPacket)> + '_ {
        let start = match range.start_bound() {
            Bound::Included(&s) => self.packets.partition_point(|&(n, _)| n < s),
            Bound::Excluded(&s) => self.packets.partition_point(|&(n, _)| n <= s),
            Bound::Unbounded => 0,
        };
        let end = range.end_bound().cloned();
        self.packets
            .range(start..)
            .take_while(move |&&(n, _)| match end {
                Bound::Included(e) => n <= e,
                Bound::Excluded(e) => n < e,
                Bound::Unbounded => true,
            })
            .filter_map(|(n, p)| Some((n, p.as_ref()?)))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &SentPacket> {
        self.packets.iter().filter_map(|(_, p)| p.as_ref())
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut SentPacket> {
        self.packets.iter_mut().filter_map(|(_, p)| p.as_mut())
    }

    pub(super) fn into_values(self) -> impl Iterator<Item = SentPacket> {
        self.packets.into_iter().filter_map(|(_, p)| p)
    }
}

impl Index<&u64> for SentPackets {
    type Output = SentPacket;

    fn index(&self, number: &u64) -> &SentPacket {
        self.get(number).expect("no such sent packet")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::Instant;

    fn packet(size: u16) -> SentPacket {
        SentPacket {
            path_generation: 0,
            time_sent: Instant::now(),
            size,
            ack_eliciting: true,
            largest_acked: None,
            retransmits: Default::default(),
            stream_frames: Default::default(),
        }
    }

    /// The same operations on a `BTreeMap` (what quinn-proto used) and on
    /// `SentPackets` give the same answers, through holes, gaps in the
    /// numbers and emptying.
    #[test]
    fn behaves_as_the_btree_map_it_replaces() {
        let mut map = BTreeMap::new();
        let mut sent = SentPackets::new();
        let mut next = 0u64;
        // A deterministic mix: runs of sends, skipped numbers, in-order and
        // out-of-order removals, removals of untracked numbers.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for step in 0..20_000u32 {
            match random() % 10 {
                0..=4 => {
                    next += 1 + u64::from(random() % 16 == 0);
                    map.insert(next, step as u16);
                    sent.insert(next, packet(step as u16));
                }
                5..=7 => {
                    let first = map.keys().next().copied().unwrap_or(0);
                    let n = first + random() % 4;
                    assert_eq!(map.remove(&n), sent.remove(&n).map(|p| p.size), "{n}");
                }
                8 => {
                    let n = next.saturating_sub(random() % 64);
                    assert_eq!(map.remove(&n), sent.remove(&n).map(|p| p.size), "{n}");
                }
                _ => {
                    let a = next.saturating_sub(random() % 80);
                    let b = a + random() % 40;
                    let want: Vec<_> = map.range(a..=b).map(|(&n, &s)| (n, s)).collect();
                    let got: Vec<_> = sent.range(a..=b).map(|(&n, p)| (n, p.size)).collect();
                    assert_eq!(want, got, "{a}..={b}");
                    let want: Vec<_> = map.range(a..b).map(|(&n, &s)| (n, s)).collect();
                    let got: Vec<_> = sent.range(a..b).map(|(&n, p)| (n, p.size)).collect();
                    assert_eq!(want, got, "{a}..{b}");
                    let want: Vec<_> = map
                        .range((Bound::Excluded(a), Bound::Unbounded))
                        .map(|(&n, _)| n)
                        .collect();
                    let got: Vec<_> = sent
                        .range((Bound::Excluded(a), Bound::Unbounded))
                        .map(|(&n, _)| n)
                        .collect();
                    assert_eq!(want, got, "({a}..");
                    assert_eq!(map.get(&a).copied(), sent.get(&a).map(|p| p.size));
                }
            }
            let want: Vec<_> = map.values().copied().collect();
            let got: Vec<_> = sent.values().map(|p| p.size).collect();
            assert_eq!(want, got, "step {step}");
        }
        // Emptied, it lets go of its memory.
        for n in map.keys().copied().collect::<Vec<_>>() {
            assert!(sent.remove(&n).is_some());
        }
        assert_eq!(sent.values().count(), 0);
        assert!(
            sent.packets.capacity() <= CAPACITY_KEPT,
            "{}",
            sent.packets.capacity()
        );
    }
}
