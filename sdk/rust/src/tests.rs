// The kit's own tests: exact records and messages, natively.

use crate::testing::{self, AuthorizeInput, Outcome};
use crate::{abi, Decision, Handlers, Plant, Request};
use std::time::Duration;

fn validator(f: for<'a> fn(Plant<'a>) -> Decision<'a>) -> Handlers {
    Handlers { validate: Some(f), ..Handlers::NONE }
}

fn authorizer(f: for<'a> fn(Request<'a>) -> Decision<'a>) -> Handlers {
    Handlers { authorize: Some(f), ..Handlers::NONE }
}

fn fern() -> Plant<'static> {
    Plant { id: 1, name: "Fern", ..Plant::default() }
}

#[test]
fn deny_with_headers_record() {
    let h = validator(|_| {
        Decision::deny(crate::CODE_TOO_MANY_REQUESTS, "slow down").with_header("retry-after", "1").with_header("RateLimit", "\"default\";r=0;t=1")
    });
    let o = testing::validate(&h, &fern());
    let mut want = vec![1, 1, 0, 0];
    want.extend_from_slice(&42950i32.to_le_bytes());
    let mut block = Vec::new();
    for s in ["Retry-After", "1", "RateLimit", "\"default\";r=0;t=1"] {
        block.extend_from_slice(&(s.len() as u32).to_le_bytes());
        block.extend_from_slice(s.as_bytes());
    }
    want.extend_from_slice(&(block.len() as u32).to_le_bytes());
    want.extend_from_slice(&block);
    want.extend_from_slice(b"slow down");
    assert_eq!(o.record.as_deref(), Some(&want[..]));
    assert_eq!(o.headers, vec![("Retry-After".into(), "1".into()), ("RateLimit".into(), "\"default\";r=0;t=1".into())]);
}

#[test]
fn decisions() {
    let cases: [(Handlers, &str); 10] = [
        (validator(|_| Decision::allow()), "allow"),
        (validator(|p| Decision::allow_as(p.name)), "allow as Fern"),
        (validator(|p| Decision::allow_as_fmt(format_args!("{}!", p.name))), "allow as Fern!"),
        (validator(|p| Decision::deny(40060, p.name)), "deny 40060: Fern"),
        (validator(|_| crate::deny!(40061, "{}-{}", 1, "two")), "deny 40061: 1-two"),
        (validator(|_| Decision::deny(40049, "x")), "fault: sdk: deny code 40049 is outside the plugin ranges 40050–40099, 40150–40199, 40350–40399, 42950–42999, 50350–50399"),
        (validator(|_| Decision::deny(40150, "x")), "fault: sdk: validate may not deny with 40150; it may use 40050–40099, 40350–40399, 42950–42999, 50350–50399"),
        (validator(|_| Decision::fault("broken")), "fault: broken"),
        (validator(|_| Decision::allow().with_header("Set-Cookie", "a=b")), "fault: sdk: response header \"Set-Cookie\" is not allowed; see docs/abi.md"),
        (validator(|_| Decision::allow().with_header("Retry-After", "1\n")), "fault: sdk: response header Retry-After value must be 1 to 1024 bytes of printable ASCII"),
    ];
    for (h, want) in cases.iter() {
        assert_eq!(testing::validate(h, &fern()).to_string(), *want);
    }
    assert_eq!(testing::authorize(&validator(|_| Decision::allow()), &AuthorizeInput::default()).to_string(),
        "fault: sdk: authorize called but the plugin registered no authorize handler");
    assert_eq!(testing::authorize(&authorizer(|_| Decision::deny(40050, "x")), &AuthorizeInput::default()).to_string(),
        "fault: sdk: authorize may not deny with 40050; it may use 40150–40199, 40350–40399, 42950–42999, 50350–50399");
}

#[test]
fn formatted_headers() {
    let h = validator(|_| {
        crate::deny!(42950, "wait {}", 3)
            .with_header_fmt("retry-after", format_args!("{}", 3))
            .with_header_fmt("RateLimit", format_args!("\"m\";r={};t={}", 0, 3))
            .with_header_fmt("Retry-After", format_args!("{}", 4))
    });
    let o = testing::validate(&h, &fern());
    assert_eq!(o.to_string(), "deny 42950: wait 3");
    assert_eq!(o.headers, vec![("Retry-After".into(), "4".into()), ("RateLimit".into(), "\"m\";r=0;t=3".into())]);
    let h = validator(|_| Decision::allow().with_header_fmt("RateLimit", format_args!("{}", "x".repeat(300))));
    assert_eq!(testing::validate(&h, &fern()).to_string(), "fault: sdk: formatted response header values exceed 256 bytes");
}

#[test]
fn long_text_is_cut_on_a_character() {
    let h = validator(|_| crate::deny!(40060, "{}", "é".repeat(600)));
    let o = testing::validate(&h, &fern());
    assert_eq!(o.text, "é".repeat(512));
    let h = validator(|_| crate::deny!(40060, "a{}", "é".repeat(600)));
    assert_eq!(testing::validate(&h, &fern()).text.len(), 1023, "a 2-byte character crossing 1024 is left out");
}

#[test]
fn plant_fields() {
    let h = validator(|p| {
        if p.tag == Some("") && p.allowed_as == "ci" && p.caller.name == "ci" && p.caller.has_scope("plants:write") && !p.caller.has_scope("plants") && p.id == -3 {
            Decision::allow()
        } else {
            Decision::fault("fields")
        }
    });
    let p = Plant { id: -3, name: "n", tag: Some(""), allowed_as: "ci", caller: crate::Principal { name: "ci", scopes: "plants:read plants:write" } };
    assert_eq!(testing::validate(&h, &p).to_string(), "allow");
    // A version-1 message (no caller) and a cut one.
    let mut v1 = testing::encode_validate(&Plant { id: 1, name: "n", ..Plant::default() });
    v1.truncate(v1.len() - 8);
    let h = validator(|p| Decision::allow_as(if p.caller.name.is_empty() { "none" } else { "some" }));
    assert_eq!(testing::validate_message(&h, &v1).to_string(), "allow as none");
    assert_eq!(testing::validate_message(&h, &v1[..13]).to_string(), "fault: sdk: validate request: message shorter than its layout");
}

#[test]
fn request_fields() {
    let h = authorizer(|r| {
        let ok = r.method == "DELETE" && r.path == "/plants/42" && r.credential == "tok" && r.route == "DELETE /plants/{id}"
            && r.path_id == Some(42) && r.request_id == "rid" && r.client == "192.0.2.7"
            && r.header("x-tenant") == Some(&b"blue"[..]) && r.header("X-Other").is_none()
            && r.credential_digest() == Some(&[7; 32]) && r.caller.name == "ci";
        if ok { Decision::allow_as("ci") } else { Decision::fault("fields") }
    });
    let r = AuthorizeInput {
        method: "DELETE", path: "/plants/42", credential: "tok", digest: Some([7; 32]), route: "DELETE /plants/{id}",
        path_id: Some(42), request_id: "rid", client: "192.0.2.7", headers: &[("X-Tenant", "blue")], principal: "ci", scopes: "plants:write",
    };
    assert_eq!(testing::authorize(&h, &r).to_string(), "allow as ci");
}

#[test]
fn configure_without_handler() {
    let h = Handlers::NONE;
    for c in ["", " null ", "{}"] {
        assert_eq!(testing::configure(&h, c), Outcome { verdict: 0, code: 0, text: String::new(), headers: vec![], record: None });
    }
    assert_eq!(testing::configure(&h, r#"{"a":1}"#).to_string(), r#"fault: the plugin takes no config, got "{\"a\":1}": remove "config" from its sidecar, or handle it with plantgate::plugin!(configure: …)"#);
    let h = Handlers { configure: Some(|c| if c == b"{}" { Ok(()) } else { Err("want {}".into()) }), ..Handlers::NONE };
    assert_eq!(testing::configure(&h, "[]").to_string(), "fault: want {}");
    assert_eq!(h.phases(), 0);
    assert_eq!(validator(|_| Decision::allow()).phases(), abi::PHASE_VALIDATE);
}

#[test]
fn token_lookup() {
    let digest = [9u8; 32];
    testing::host(|h| h.tokens.insert(digest, testing::token_record(1, 2, false, &digest, "ci", "plants:read plants:write")));
    let mut buf = [0u8; 512];
    let t = crate::lookup_token(&digest, &mut buf).unwrap();
    assert_eq!((t.name, t.scopes, t.created_ms, t.expires_ms, t.revoked, t.digest), ("ci", "plants:read plants:write", 1, 2, false, &digest[..]));
    assert!(t.has_scope("plants:write") && t.expired(2) && !t.expired(1));
    let mut small = [0u8; 8];
    assert_eq!(crate::lookup_token(&digest, &mut small).unwrap_err(), crate::Error::TooSmall(52 + 4 + 2 + 4 + 24));
    assert_eq!(crate::lookup_token(&[1; 32], &mut buf).unwrap_err(), crate::Error::NotFound);
    testing::host(|h| h.down = true);
    assert_eq!(crate::lookup_token(&digest, &mut buf).unwrap_err(), crate::Error::Unavailable);
}

#[test]
fn kv() {
    testing::host(|h| h.now_ms = 1_500);
    crate::set("k", b"v", Duration::ZERO).unwrap();
    assert_eq!(crate::get("k").unwrap(), b"v");
    let mut one = [0u8; 0];
    assert_eq!(crate::get_into("k", &mut one).unwrap_err(), crate::Error::TooSmall(1));
    assert_eq!(crate::get("nope").unwrap_err(), crate::Error::NotFound);
    assert_eq!(crate::get("").unwrap_err(), crate::Error::BadArgument);
    assert_eq!(crate::delete("k"), Ok(true));
    assert_eq!(crate::delete("k"), Ok(false));
    assert_eq!(crate::incr("c", 5, Duration::from_secs(1)), Ok(5));
    let t = crate::take_fixed("t", 2, Duration::from_secs(1)).unwrap();
    assert_eq!(t, crate::Taken { allowed: true, remaining: 1, reset: Duration::from_millis(500) });
    crate::take_fixed("t", 2, Duration::from_secs(1)).unwrap();
    assert!(!crate::take_fixed("t", 2, Duration::from_secs(1)).unwrap().allowed);
    // Sliding: 2 per 60 s in slots of 3 s; units taken at 1.5 s free at 63 s.
    let min = Duration::from_secs(60);
    assert_eq!(crate::take("s", 2, min).unwrap(), crate::Taken { allowed: true, remaining: 1, reset: Duration::from_millis(61_500) });
    crate::take("s", 2, min).unwrap();
    testing::host(|h| h.now_ms = 62_999);
    assert_eq!(crate::take("s", 2, min).unwrap(), crate::Taken { allowed: false, remaining: 0, reset: Duration::from_millis(1) });
    testing::host(|h| h.now_ms = 63_000);
    assert!(crate::take("s", 2, min).unwrap().allowed);
    testing::host(|h| h.down = true);
    assert_eq!(crate::take("t", 2, Duration::from_secs(1)).unwrap_err(), crate::Error::Unavailable);
}

#[test]
fn log() {
    crate::log(crate::Level::Warn, "plain");
    crate::logf(crate::Level::Info, format_args!("n={}", 3));
    let logs = testing::host(|h| std::mem::take(&mut h.logs));
    assert_eq!(logs, vec![(4, "plain".to_string()), (0, "n=3".to_string())]);
}
