//! JSON read into a tree whose numbers keep their exact value: what a
//! content filter ([`super::ContentFilter`]) is compiled from and matched
//! against. An event's payload is kept as published (G13), so
//! `18446744073709551617` stays one more than `18446744073709551616` and
//! `1e3` equals `1000.0`: numbers compare by decimal value, whatever their
//! spelling, never through a 64-bit float.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::value::RawValue;

/// A JSON value with exact numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, by value.
    Number(Decimal),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object (a repeated member: the last one counts).
    Object(BTreeMap<String, Json>),
}

impl Json {
    /// Reads well-formed JSON text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bad = |e: serde_json::Error| e.to_string();
        Ok(match text.as_bytes().first() {
            Some(b'{') => Self::Object(
                serde_json::from_str::<BTreeMap<String, &RawValue>>(text)
                    .map_err(bad)?
                    .into_iter()
                    .map(|(k, v)| Ok((k, Self::parse(v.get())?)))
                    .collect::<Result<_, String>>()?,
            ),
            Some(b'[') => Self::Array(
                serde_json::from_str::<Vec<&RawValue>>(text)
                    .map_err(bad)?
                    .into_iter()
                    .map(|v| Self::parse(v.get()))
                    .collect::<Result<_, _>>()?,
            ),
            Some(b'"') => Self::String(serde_json::from_str(text).map_err(bad)?),
            Some(b't' | b'f') => Self::Bool(serde_json::from_str(text).map_err(bad)?),
            Some(b'n') => {
                serde_json::from_str::<()>(text).map_err(bad)?;
                Self::Null
            }
            _ => Self::Number(Decimal::parse(text).ok_or("is not a JSON value")?),
        })
    }

    /// The member `key` of an object; `None` for anything else.
    pub fn member(&self, key: &str) -> Option<&Json> {
        match self {
            Self::Object(m) => m.get(key),
            _ => None,
        }
    }

    /// How deep arrays and objects nest in it (a scalar: 0).
    pub fn depth(&self) -> usize {
        match self {
            Self::Array(a) => 1 + a.iter().map(Self::depth).max().unwrap_or(0),
            Self::Object(m) => 1 + m.values().map(Self::depth).max().unwrap_or(0),
            _ => 0,
        }
    }
}

/// A decimal number as `0.digits × 10^exponent`, normalized (no leading
/// or trailing zero digit; zero has no digits and no sign), so that equal
/// values are equal structurally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

impl Decimal {
    /// Reads a JSON number (`-?int(.frac)?(e[+-]?exp)?`); `None` when it is
    /// not one.
    pub fn parse(text: &str) -> Option<Self> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mantissa, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (int, frac) = match mantissa.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (mantissa, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(int) || (int.len() > 1 && int.starts_with('0')) {
            return None;
        }
        if frac.is_some_and(|f| !all_digits(f)) {
            return None;
        }
        let exp = match exp {
            None => 0,
            Some(e) => {
                let d = e.strip_prefix(['+', '-']).unwrap_or(e);
                if !all_digits(d) {
                    return None;
                }
                // Beyond ±10^15 every comparison this makes is decided by
                // the sign of the exponent alone.
                let significant = d.trim_start_matches('0');
                let magnitude: i64 = if significant.is_empty() {
                    0
                } else {
                    significant.parse().unwrap_or(i64::MAX)
                };
                let magnitude = magnitude.min(1_000_000_000_000_000);
                if e.starts_with('-') {
                    -magnitude
                } else {
                    magnitude
                }
            }
        };
        let joined = format!("{int}{}", frac.unwrap_or(""));
        let leading = joined.len() - joined.trim_start_matches('0').len();
        let digits = joined.trim_matches('0').to_owned();
        if digits.is_empty() {
            return Some(Self {
                negative: false,
                digits,
                exponent: 0,
            });
        }
        Some(Self {
            negative,
            digits,
            exponent: int.len() as i64 + exp - leading as i64,
        })
    }

    fn sign(&self) -> i8 {
        match (self.digits.is_empty(), self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        let by_sign = self.sign().cmp(&other.sign());
        if by_sign != Ordering::Equal || self.sign() == 0 {
            return by_sign;
        }
        let magnitude = self
            .exponent
            .cmp(&other.exponent)
            .then_with(|| self.digits.cmp(&other.digits));
        if self.negative {
            magnitude.reverse()
        } else {
            magnitude
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Decimal {
        Decimal::parse(s).unwrap_or_else(|| panic!("{s} parses"))
    }

    #[test]
    fn numbers_compare_by_value_whatever_their_spelling() {
        assert_eq!(n("1000"), n("1e3"));
        assert_eq!(n("1000"), n("1000.000"));
        assert_eq!(n("0.5"), n("5E-1"));
        assert_eq!(n("0"), n("-0.0"));
        assert_eq!(n("1"), n("1e0"));
        assert_eq!(n("5"), n("5E+00"));
        assert_eq!(n("5"), n("5e-0"));
        assert!(n("5e0") < n("1000"));
        assert!(n("18446744073709551617") > n("18446744073709551616"));
        assert!(n("-18446744073709551617") < n("-18446744073709551616"));
        assert!(n("0.1") > n("0.09999999999999999999"));
        assert!(n("-1") < n("0") && n("0") < n("1e-400"));
        assert!(n("1e400") > n("99999"));
        assert!(n("12") < n("123") && n("2") > n("1.23"));
        assert!(n("-2") < n("-1.5"));
    }

    #[test]
    fn what_is_not_a_json_number_is_refused() {
        for bad in [
            "", "-", "01", "1.", ".5", "1e", "+1", "0x10", "1.2.3", "NaN",
        ] {
            assert!(Decimal::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_tree_keeps_exact_numbers_and_the_last_repeated_member() {
        let j = Json::parse(r#" {"a": [1, 18446744073709551617, "x"], "b": {"c": null}, "a2": true, "d": 1, "d": 2} "#)
            .unwrap();
        assert_eq!(
            j.member("a"),
            Some(&Json::Array(vec![
                Json::Number(n("1")),
                Json::Number(n("18446744073709551617")),
                Json::String("x".into())
            ]))
        );
        assert_eq!(j.member("b").and_then(|b| b.member("c")), Some(&Json::Null));
        assert_eq!(j.member("d"), Some(&Json::Number(n("2"))));
        assert_eq!(j.depth(), 2);
        assert!(Json::parse("{").is_err());
    }
}
