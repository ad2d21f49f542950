;; ratelimit: an ABI 2 authorize plugin that rate-limits each client
;; address to 3 requests per sliding minute with plantgate.kv_take_sliding,
;; reading the client from the request context (version-2 fields of the
;; authorize message). It allows, or denies 42950 "rate limited" with the
;; response header Retry-After: ceil(reset / 1000) seconds; a KV error
;; denies 50350 "store unavailable".
(module
  (import "plantgate" "kv_take_sliding" (func $take (param i32 i32 i64 i64) (result i64)))
  (memory (export "memory") 1)
  ;; deny 50350 "store unavailable" (25 bytes)
  (data (i32.const 0) "\01\00\00\00\ae\c4\00\00store unavailable")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param $n i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $n) (i32.const 32768))
      (then (i32.const 0)) (else (i32.const 4096))))
  ;; skip returns the address after the length-prefixed string at $p.
  (func $skip (param $p i32) (result i32)
    (i32.add (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))))
  (func (export "plantgate_authorize") (param $ptr i32) (param $len i32) (result i64)
    (local $p i32) (local $r i64) (local $secs i32) (local $digits i32) (local $q i32) (local $end i32)
    ;; method, path, credential, digest, route, then u32 flags and i64 id
    (local.set $p (call $skip (call $skip (call $skip (call $skip (call $skip (local.get $ptr)))))))
    (local.set $p (i32.add (local.get $p) (i32.const 12)))
    (local.set $p (call $skip (local.get $p)))             ;; request id; $p is at the client
    (local.set $r (call $take (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))
      (i64.const 3) (i64.const 60000)))
    (if (i64.lt_s (local.get $r) (i64.const 0))
      (then (return (i64.const 25))))                      ;; record at 0, 25 bytes
    (if (i64.eqz (i64.and (local.get $r) (i64.const 0x4000000000000000)))
      (then (return (i64.const 0))))
    ;; seconds to wait, rounded up
    (local.set $secs (i32.wrap_i64 (i64.div_u
      (i64.add (i64.and (local.get $r) (i64.const 0xffffffff)) (i64.const 999)) (i64.const 1000))))
    ;; digits of $secs
    (local.set $digits (i32.const 1))
    (local.set $q (local.get $secs))
    (block $done (loop $count
      (br_if $done (i32.lt_u (local.get $q) (i32.const 10)))
      (local.set $q (i32.div_u (local.get $q) (i32.const 10)))
      (local.set $digits (i32.add (local.get $digits) (i32.const 1)))
      (br $count)))
    ;; the record at 1024: verdict deny, flag headers, code 42950
    (i32.store (i32.const 1024) (i32.const 0x0101))
    (i32.store (i32.const 1028) (i32.const 42950))
    ;; header block: name "Retry-After", value the digits
    (i32.store (i32.const 1032) (i32.add (i32.const 19) (local.get $digits)))
    (i32.store (i32.const 1036) (i32.const 11))
    (memory.copy (i32.const 1040) (i32.const 32) (i32.const 11))
    (i32.store (i32.const 1051) (local.get $digits))
    (local.set $end (i32.add (i32.const 1055) (local.get $digits)))
    (local.set $q (local.get $secs))
    (loop $write
      (local.set $end (i32.sub (local.get $end) (i32.const 1)))
      (i32.store8 (local.get $end) (i32.add (i32.const 48) (i32.rem_u (local.get $q) (i32.const 10))))
      (local.set $q (i32.div_u (local.get $q) (i32.const 10)))
      (br_if $write (i32.ne (local.get $end) (i32.const 1055))))
    ;; text "rate limited" after the block
    (local.set $end (i32.add (i32.const 1055) (local.get $digits)))
    (memory.copy (local.get $end) (i32.const 48) (i32.const 12))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32))
      (i64.extend_i32_u (i32.sub (i32.add (local.get $end) (i32.const 12)) (i32.const 1024)))))
  (data (i32.const 32) "Retry-After")
  (data (i32.const 48) "rate limited"))
