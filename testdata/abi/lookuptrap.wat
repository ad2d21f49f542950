;; lookuptrap: authorize looks up the credential's digest with
;; plantgate.token_lookup. On a path starting "/x" it traps without a
;; lookup; on "/l" it looks up twice and then traps (a fault after the store
;; failed this call); otherwise it denies 50350 when the store is
;; unavailable and allows else. Requests without a digest allow.
(module
  (import "plantgate" "token_lookup" (func $lookup (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 40100) "\01\00\00\00\ae\c4\00\00token store unavailable") ;; 31 bytes
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func $skip (param $p i32) (result i32)
    (i32.add (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))))
  (func (export "plantgate_authorize") (param $p i32) (param i32) (result i64)
    (local $path i32) (local $d i32) (local $r i32)
    (local.set $path (i32.load8_u offset=9 (i32.add (local.get $p) (i32.load (local.get $p)))))
    (if (i32.eq (local.get $path) (i32.const 0x78)) (then (unreachable))) ;; "/x"
    ;; $d: the digest's length prefix, after method, path and credential.
    (local.set $d (call $skip (call $skip (call $skip (local.get $p)))))
    (if (i32.ne (i32.load (local.get $d)) (i32.const 32)) (then (return (i64.const 0))))
    (local.set $r (call $lookup (i32.add (local.get $d) (i32.const 4)) (i32.const 32) (i32.const 45000) (i32.const 256)))
    (if (i32.eq (local.get $path) (i32.const 0x6c)) ;; "/l"
      (then
        (drop (call $lookup (i32.add (local.get $d) (i32.const 4)) (i32.const 32) (i32.const 45000) (i32.const 256)))
        (unreachable)))
    (if (i32.eq (local.get $r) (i32.const -2)) (then (return (i64.const 0x00009ca40000001f))))
    (i64.const 0)))
