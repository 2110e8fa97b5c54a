//! The values of `tern bench`'s flags that clap does not parse alone:
//! counts, rates, shares and hey's Go durations, each refused with a
//! message that says what was expected.

use std::time::Duration;

use tern_bench::BenchError;

/// A count (`-n`, `-c`, `--streams`, ...): a whole number of at least 1.
/// Negative numbers reach this parser (`allow_negative_numbers`), so `-c -5`
/// is told what is wrong instead of clap's tip to write `-- -5` (which
/// would make it a URL).
pub(super) fn at_least_one<T: std::str::FromStr + From<u8> + PartialOrd>(
    s: &str,
) -> Result<T, String> {
    match s.trim().parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err("expected a whole number of at least 1".into()),
    }
}

/// `-t`: whole seconds, 0 for no timeout.
pub(super) fn whole_seconds(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| "expected whole seconds (0 for no timeout)".into())
}

/// `--rate` and `-q`: requests per second, above 0.
pub(super) fn positive_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err("expected requests per second above 0".into()),
    }
}

/// A share as `5%` or `0.05`.
pub(super) fn parse_share(s: &str) -> Result<f64, String> {
    let (number, scale) = match s.trim().strip_suffix('%') {
        Some(p) => (p, 0.01),
        None => (s.trim(), 1.0),
    };
    number
        .trim()
        .parse::<f64>()
        .ok()
        .map(|v| v * scale)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("{s:?} is not a share like 5% or 0.05"))
}

/// Parses Go durations as hey takes them: `10s`, `1m30s`, `500ms`, `1.5h`.
pub(super) fn parse_go_duration(s: &str) -> Result<Duration, BenchError> {
    let bad = || {
        BenchError::Config(format!(
            "-z {s:?}: expected a duration like 10s, 1m30s, 500ms"
        ))
    };
    let mut total = 0.0f64;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += value * unit;
        rest = &rest[unit_len..];
    }
    if total <= 0.0 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_go_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("s").is_err());
    }
}
