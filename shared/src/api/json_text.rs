//! The checks of JSON text kept as published (an event's `data`, G13)
//! that the grammar allows but a reader cannot use: nesting too deep and
//! escapes of lone UTF-16 surrogates. The body parser ([`super::body`])
//! applies them to every such member.

/// Checks JSON text that is already known to be well formed for what the
/// grammar allows but a reader cannot use: nesting deeper than `max_depth`
/// (strict parsers refuse it, recursive ones may overflow their stack) and
/// `\u` escapes of lone UTF-16 surrogates (no Unicode string can hold one).
/// One pass over the bytes, no allocation.
pub fn check_json_text(text: &str, max_depth: usize) -> Result<(), String> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Err(format!(
                        "nests arrays and objects deeper than {max_depth} levels"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => {
                i = end_of_string(b, i + 1)?;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

const LONE_SURROGATE: &str = "escapes a lone UTF-16 surrogate (\\uD800 to \\uDFFF unpaired)";

/// The index just past a string's closing quote, from just past its
/// opening one; refuses an escaped surrogate that is not half of a pair.
fn end_of_string(b: &[u8], mut i: usize) -> Result<usize, String> {
    // A high surrogate escape waiting for its low half right after it.
    let mut high = false;
    while i < b.len() {
        let escape_u = b[i] == b'\\' && b.get(i + 1) == Some(&b'u');
        if escape_u {
            let unit = b
                .get(i + 2..i + 6)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u16::from_str_radix(h, 16).ok())
                .ok_or("has a malformed \\u escape")?;
            match unit {
                0xD800..=0xDBFF if !high => high = true,
                0xDC00..=0xDFFF if high => high = false,
                _ if high => return Err(LONE_SURROGATE.into()),
                0xDC00..=0xDFFF => return Err(LONE_SURROGATE.into()),
                _ => {}
            }
            i += 6;
            continue;
        }
        if high {
            return Err(LONE_SURROGATE.into());
        }
        match b[i] {
            b'"' => return Ok(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    Err("has an unterminated string".into())
}
