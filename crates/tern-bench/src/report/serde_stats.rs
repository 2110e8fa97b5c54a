//! JSON form of [`Stats`]: histograms as base64 of the HdrHistogram V2
//! encoding (readable by every HdrHistogram implementation), everything
//! else as plain fields.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::http3::QuicStats;
use crate::stats::{SecondBucket, Stats};
use crate::tls::Negotiated;

#[derive(Serialize, Deserialize)]
struct Repr {
    histograms: BTreeMap<String, String>,
    series: Vec<SecondBucket>,
    status: BTreeMap<u16, u64>,
    errors: BTreeMap<String, u64>,
    body_bytes: u64,
    connections: u64,
    /// Absent in reports of older versions.
    #[serde(default)]
    set_up: u64,
    /// Absent in reports of older versions.
    #[serde(default)]
    set_up_failed: u64,
    handshakes: u64,
    resumed: u64,
    handshake_bytes: u64,
    /// Absent in reports of older versions.
    #[serde(default)]
    tickets: u64,
    negotiated: Vec<(Negotiated, u64)>,
    /// Absent in reports of older versions.
    #[serde(default)]
    cert_compressed: BTreeMap<String, u64>,
    elapsed_us: u64,
    #[serde(default)]
    quic: QuicStats,
    /// Latency histogram of each second of `series` (same encoding);
    /// absent in reports of older versions.
    #[serde(default)]
    second_latency: Vec<String>,
}

const NAMES: [&str; 6] = ["total", "dns", "connect", "tls", "ttfb", "body"];

fn histograms(s: &Stats) -> [&Histogram<u64>; 6] {
    [&s.total, &s.dns, &s.connect, &s.tls, &s.ttfb, &s.body]
}

fn encode(h: &Histogram<u64>, name: &str) -> Result<String, String> {
    let mut buf = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut buf)
        .map_err(|e| format!("histogram {name}: {e:?}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(buf))
}

fn decode(text: &str, name: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("histogram {name}: {e}"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("histogram {name}: {e:?}"))
}

pub fn serialize<S: serde::Serializer>(stats: &Stats, ser: S) -> Result<S::Ok, S::Error> {
    let mut encoded = BTreeMap::new();
    for (name, h) in NAMES.iter().zip(histograms(stats)) {
        encoded.insert(
            name.to_string(),
            encode(h, name).map_err(serde::ser::Error::custom)?,
        );
    }
    let second_latency = stats
        .second_latency
        .iter()
        .map(|h| encode(h, "second_latency"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(serde::ser::Error::custom)?;
    Repr {
        histograms: encoded,
        series: stats.series.clone(),
        status: stats.status.clone(),
        errors: stats.errors.clone(),
        body_bytes: stats.body_bytes,
        connections: stats.connections,
        set_up: stats.set_up,
        set_up_failed: stats.set_up_failed,
        handshakes: stats.handshakes,
        resumed: stats.resumed,
        handshake_bytes: stats.handshake_bytes,
        tickets: stats.tickets,
        negotiated: stats
            .negotiated
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        cert_compressed: stats.cert_compressed.clone(),
        elapsed_us: stats.elapsed.as_micros() as u64,
        quic: stats.quic.clone(),
        second_latency,
    }
    .serialize(ser)
}

pub fn deserialize<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Stats, D::Error> {
    let repr = Repr::deserialize(de)?;
    let mut stats = Stats::default();
    let targets = [
        &mut stats.total,
        &mut stats.dns,
        &mut stats.connect,
        &mut stats.tls,
        &mut stats.ttfb,
        &mut stats.body,
    ];
    for (name, slot) in NAMES.iter().zip(targets) {
        let Some(text) = repr.histograms.get(*name) else {
            return Err(serde::de::Error::custom(format!(
                "missing histogram {name}"
            )));
        };
        let h = decode(text, name).map_err(serde::de::Error::custom)?;
        slot.add(&h)
            .map_err(|e| serde::de::Error::custom(format!("histogram {name}: {e:?}")))?;
    }
    stats.series = repr.series;
    stats.status = repr.status;
    stats.errors = repr.errors;
    stats.body_bytes = repr.body_bytes;
    stats.connections = repr.connections;
    stats.set_up = repr.set_up;
    stats.set_up_failed = repr.set_up_failed;
    stats.handshakes = repr.handshakes;
    stats.resumed = repr.resumed;
    stats.handshake_bytes = repr.handshake_bytes;
    stats.tickets = repr.tickets;
    stats.negotiated = repr.negotiated.into_iter().collect();
    stats.cert_compressed = repr.cert_compressed;
    stats.elapsed = Duration::from_micros(repr.elapsed_us);
    stats.quic = repr.quic;
    stats.second_latency = repr
        .second_latency
        .iter()
        .map(|text| {
            let mut h = decode(text, "second_latency")?;
            h.auto(true);
            Ok(h)
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(serde::de::Error::custom)?;
    Ok(stats)
}
