// Native tests: `make -C sdk/rust test` (rustc --test on the host). The
// handlers run through the kit's export bodies, so each assertion is on
// the decision record as the host would read it.

use super::PLANTGATE;
use plantgate::testing::{self, Outcome};
use plantgate::Plant;

fn plant(id: i64, name: &str, tag: Option<&str>) -> Outcome {
    testing::validate(&PLANTGATE, &Plant { id, name, tag, ..Plant::default() })
}

#[test]
fn default_rules() {
    let name100 = "é".repeat(100);
    let tag50 = "🌿".repeat(50);
    let name101 = "a".repeat(101);
    let tag51 = "t".repeat(51);
    let nuls = "\0".repeat(200);
    let cases: &[(i64, &str, Option<&str>, &str)] = &[
        (1, "Monstera", Some("tropical"), "allow"),
        (7, "Fern", None, "allow"),
        (i64::MAX, "Fern", None, "allow"),
        (2, "Ficus élégant 🌿", Some("日本"), "allow"),
        (3, &name100, None, "allow"),
        (4, "  a  ", None, "allow"),
        (5, "Fern", Some(&tag50), "allow"),
        (0, "Fern", None, "deny 40050: id must be at least 1, got 0"),
        (-5, "Fern", None, "deny 40050: id must be at least 1, got -5"),
        (0, "", None, "deny 40050: id must be at least 1, got 0"),
        (1, "", None, "deny 40051: name must be 1–100 characters after trimming, got 0"),
        (1, "   ", None, "deny 40051: name must be 1–100 characters after trimming, got 0"),
        (1, &name101, None, "deny 40051: name must be 1–100 characters after trimming, got 101"),
        (1, "Mon\u{7}stera", None, "deny 40052: name must not contain control characters, found U+0007 at character 4"),
        (1, &nuls, None, "deny 40052: name must not contain control characters, found U+0000 at character 1"),
        (1, "Fern", Some(""), "deny 40053: tag must be 1–50 characters after trimming, got 0"),
        (1, "Fern", Some(&tag51), "deny 40053: tag must be 1–50 characters after trimming, got 51"),
        (1, "Fern", Some("a\tb"), "deny 40054: tag must not contain control characters, found U+0009 at character 2"),
        (1, "", Some(""), "deny 40051: name must be 1–100 characters after trimming, got 0"),
        // Unicode white space is trimmed (U+3000, U+00A0), C1 controls are controls.
        (1, "\u{3000}\u{a0}", None, "deny 40051: name must be 1–100 characters after trimming, got 0"),
        (1, "ab\u{85}", None, "deny 40052: name must not contain control characters, found U+0085 at character 3"),
    ];
    for (id, name, tag, want) in cases {
        let got = plant(*id, name, *tag);
        assert_eq!(got.to_string(), *want, "id {} name {:?} tag {:?}", id, name, tag);
    }
}

#[test]
fn deny_record_bytes() {
    let got = plant(0, "Fern", None);
    let mut want = vec![1, 0, 0, 0];
    want.extend_from_slice(&40050i32.to_le_bytes());
    want.extend_from_slice(b"id must be at least 1, got 0");
    assert_eq!(got.record, Some(want));
    assert_eq!(plant(1, "Fern", None).record, None, "a plain allow has no record");
}

#[test]
fn config() {
    assert!(testing::configure(&PLANTGATE, r#"{"name_min": 2, "name_max": 2, "id_min": 10, "allow_control": true}"#).allowed());
    assert_eq!(plant(9, "ab", None).to_string(), "deny 40050: id must be at least 10, got 9");
    assert_eq!(plant(10, "abc", None).to_string(), "deny 40051: name must be exactly 2 characters after trimming, got 3");
    assert_eq!(plant(10, "a\u{7}", None).to_string(), "allow", "allow_control lets control characters through");
    for (config, want) in [
        ("null", "allow"),
        ("  ", "allow"),
        (r#"{"name_min": 5, "name_max": 4}"#, "fault: plant-rules config: name_min (5) must not exceed name_max (4)"),
        (r#"{"tag_min": 3, "tag_max": 1}"#, "fault: plant-rules config: tag_min (3) must not exceed tag_max (1)"),
        (r#"{"zeta": 1, "id_min": -1}"#, "fault: plant-rules config: id_min must be an integer ≥ 0, got -1"),
        (r#"{"zeta": 1}"#, r#"fault: plant-rules config: unknown key "zeta" (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)"#),
        (r#"{"name_max": 1.5}"#, "fault: plant-rules config: name_max must be an integer ≥ 0, got 1.5"),
        (r#"{"name_max": null}"#, "fault: plant-rules config: name_max must be an integer ≥ 0, got null"),
        (r#"{"name_max": "7"}"#, r#"fault: plant-rules config: name_max must be an integer ≥ 0, got "7""#),
        (r#"{"allow_control": 1}"#, "fault: plant-rules config: allow_control must be true or false, got 1"),
        (r#"{"id_min": 1, "id_min": 3}"#, "allow"),
        ("[1]", "fault: plant-rules config: want a JSON object: cannot unmarshal array into an object"),
        ("{", "fault: plant-rules config: want a JSON object: unexpected end of JSON input"),
    ] {
        assert_eq!(testing::configure(&PLANTGATE, config).to_string(), want, "config {}", config);
    }
    assert_eq!(plant(2, "ab", None).to_string(), "deny 40050: id must be at least 3, got 2", "a repeated key takes its last value");
}
