//! An archived event's payload as stored. A payload longer than
//! [`DEFLATE_OVER`] bytes is stored deflated (a binary `payload_z` instead
//! of the string `payload`) when that makes it smaller: DynamoDB bills a
//! write unit per started kilobyte of the item, and a 1 KiB JSON payload
//! with its keys and times is just over one (about 1.3 KB) plain and under
//! one deflated. The bytes read back are the bytes accepted, so signatures
//! and bodies are unchanged.

use std::io::{Read, Write};

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;
use hooklane_core::ports::StoreResult;

use super::attrs::{corrupt, get_s};
use crate::store::Item;
use crate::string_attr;

/// Payloads longer than this (bytes) are stored deflated when smaller so.
const DEFLATE_OVER: usize = 256;

/// The payload attribute of an event item: deflated when long and smaller
/// so, as is otherwise.
pub(crate) fn payload_attr(payload: &str) -> (&'static str, AttributeValue) {
    if payload.len() > DEFLATE_OVER {
        let mut z = DeflateEncoder::new(Vec::new(), Compression::default());
        if z.write_all(payload.as_bytes()).is_ok() {
            if let Ok(deflated) = z.finish() {
                if deflated.len() < payload.len() {
                    return ("payload_z", AttributeValue::B(Blob::new(deflated)));
                }
            }
        }
    }
    ("payload", string_attr(payload))
}

/// An event item's payload, from whichever attribute holds it.
pub(crate) fn payload_of(item: &Item) -> StoreResult<bytes::Bytes> {
    if let Some(text) = get_s(item, "payload") {
        return Ok(bytes::Bytes::from(text.to_owned()));
    }
    let Some(AttributeValue::B(deflated)) = item.get("payload_z") else {
        return Err(corrupt("event payload"));
    };
    let mut out = Vec::with_capacity(deflated.as_ref().len() * 3);
    DeflateDecoder::new(deflated.as_ref())
        .read_to_end(&mut out)
        .map_err(|_| corrupt("event payload"))?;
    Ok(bytes::Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(payload: &str) -> Item {
        let (name, value) = payload_attr(payload);
        Item::from([(name.to_owned(), value)])
    }

    #[test]
    fn a_long_payload_is_stored_deflated_and_read_back_byte_for_byte() {
        let long = format!(
            r#"{{"type":"invoice.paid","data":{{"lines":[{}]}}}}"#,
            (0..40)
                .map(|i| format!(r#"{{"id":"il_{i:04}","amount":{}}}"#, i * 37))
                .collect::<Vec<_>>()
                .join(",")
        );
        let item = stored(&long);
        let Some(AttributeValue::B(z)) = item.get("payload_z") else {
            panic!("a long, repetitive payload is deflated");
        };
        assert!(z.as_ref().len() < long.len() / 2);
        assert_eq!(payload_of(&item).unwrap(), long.as_bytes());
    }

    #[test]
    fn a_short_payload_is_stored_as_it_is_and_any_reads_back_byte_for_byte() {
        let short = r#"{"type":"a","data":{}}"#;
        assert_eq!(get_s(&stored(short), "payload"), Some(short));
        assert_eq!(payload_of(&stored(short)).unwrap(), short.as_bytes());
        // Text that deflates little, whichever way it is stored.
        let noise: String = (0..600u32)
            .map(|i| char::from(b'!' + ((i.wrapping_mul(2_654_435_761) >> 20) % 90) as u8))
            .collect();
        assert_eq!(payload_of(&stored(&noise)).unwrap(), noise.as_bytes());
    }

    #[test]
    fn a_damaged_deflated_payload_is_an_error_not_a_panic() {
        let item = Item::from([(
            "payload_z".to_owned(),
            AttributeValue::B(Blob::new(vec![0xff, 0x00, 0x13])),
        )]);
        assert!(payload_of(&item).is_err());
    }
}
